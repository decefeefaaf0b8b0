"""The estimate against the measured peak on small models (`estimate_grid.py --grid small`), by half.

Prints, per config of the small grid, its half (`small_half`: fixed before measuring), the estimate loratui gives
(device peak and torch reserved, the stated uncertainty) and, where a measured row is given, the errors; the HOLDOUT
half first. Run before measuring to record the predictions, and after with the rows:

    python bench/estimate_small.py                               # predictions only
    python bench/estimate_small.py bench/estimate_small.jsonl    # with the measured rows
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))
from estimate_grid import MODELS, SMALL, config_name, small_half
from test_estimate import recipe_text

from loratui.logic.estimate import Estimate, estimate
from loratui.recipe import load_recipe


def predicted(c: dict, tmp: Path, card_gib: float = 80.0) -> Estimate:
    """The estimate for one config of a grid (its model dir holds only config.json) on a card of card_gib; the
    held-out grid's (estimate_holdout.py) too."""
    model_dir = tmp / config_name(c)
    model_dir.mkdir(exist_ok=True)
    (model_dir / "config.json").write_text(json.dumps(MODELS[c["model"]]))
    text = recipe_text(str(model_dir), c["quant"], c["batch"], c["seq"], c["gc"], c["optim"], c["attn"], c["r"],
                       c["targets"], c.get("dropout", 0.05))
    return estimate(load_recipe(tmp / "r.toml", text), MODELS[c["model"]], card_gib)


def main() -> None:
    measured = {}
    if len(sys.argv) > 1:
        for line in Path(sys.argv[1]).read_text().splitlines():
            row = json.loads(line)
            measured[row["name"]] = row
    with tempfile.TemporaryDirectory() as tmp:
        for half in ("holdout", "fit"):
            errors = []
            print(f"# {half.upper()} half")
            for c in (c for c in SMALL if small_half(c) == half):
                got = predicted(c, Path(tmp))
                row = measured.get(config_name(c))
                seen = ""
                if row is not None and row.get("status") == "ok":
                    err = got.peak_device_gib / row["nvml_peak_gib"] - 1
                    errors.append(abs(err))
                    seen = (f"  measured {row['nvml_peak_gib']:6.2f} / {row['torch_peak_reserved_gib']:6.2f}"
                            f"  error {err:+.1%}")
                elif row is not None:
                    seen = f"  {row.get('status')}: {row.get('error', '')[:80]}"
                print(f"{config_name(c):52s} estimate {got.peak_device_gib:6.2f} / {got.peak_reserved_gib:6.2f} GiB"
                      f" (±{got.uncertainty:.0%}){seen}")
            if errors:
                print(f"# {half}: |error| max {max(errors):.1%}, median {statistics.median(errors):.1%}")


if __name__ == "__main__":
    main()
