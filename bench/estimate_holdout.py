"""The estimate against the measured peak on the held-out architectures (`estimate_grid.py --grid holdout`).

Prints, per config, the estimate loratui gives (device peak, its stated uncertainty) and, where a measured row is
given, the error. Run before measuring to record the prediction, and after with the rows:

    python bench/estimate_holdout.py                          # predictions only
    python bench/estimate_holdout.py bench/estimate_holdout.jsonl   # with the measured rows
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))
from estimate_grid import HOLDOUT, config_name  # noqa: E402
from estimate_small import predicted  # noqa: E402  (a grid row's recipe, as the calibration test writes it)


def main() -> None:
    measured = {}
    if len(sys.argv) > 1:
        for line in Path(sys.argv[1]).read_text().splitlines():
            row = json.loads(line)
            measured[row["name"]] = row
    with tempfile.TemporaryDirectory() as tmp:
        for c in HOLDOUT:
            got = predicted(c, Path(tmp), card_gib=141.0)  # the held-out grid was measured on an H200
            peak, uncertainty = got.peak_device_gib, got.uncertainty
            row = measured.get(config_name(c))
            seen = ""
            if row is not None and row.get("status") == "ok":
                seen = f"  measured {row['nvml_peak_gib']:6.2f}  error {peak / row['nvml_peak_gib'] - 1:+.1%}"
            elif row is not None:
                seen = f"  {row.get('status')}: {row.get('error', '')[:80]}"
            print(f"{config_name(c):52s} estimate {peak:6.2f} GiB (±{uncertainty:.0%}){seen}")


if __name__ == "__main__":
    main()
