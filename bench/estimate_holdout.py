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
from estimate_grid import HOLDOUT, MODELS, config_name  # noqa: E402

from loratui.logic.estimate import estimate  # noqa: E402
from loratui.recipe import load_recipe  # noqa: E402


def recipe_text(model_dir: str, c: dict) -> str:
    quant = c["quant"]
    return f"""
[model]
path = "{model_dir}"
dtype = "bfloat16"
attn_implementation = "{c['attn']}"
[quantization]
load_in_4bit = {str(quant != "bf16").lower()}
bnb_4bit_quant_type = "nf4"
bnb_4bit_use_double_quant = {str(quant == "nf4dq").lower()}
[lora]
r = {c['r']}
lora_alpha = {2 * c['r']}
lora_dropout = 0.05
target_modules = {json.dumps(c['targets'])}
[training]
per_device_train_batch_size = {c['batch']}
gradient_checkpointing = {str(c['gc']).lower()}
optim = "{c['optim']}"
bf16 = true
[data]
path = "train.jsonl"
max_length = {c['seq']}
"""


def predicted(c: dict, tmp: Path) -> tuple[float, float]:
    """(device peak GiB, stated uncertainty) for one config."""
    model_dir = tmp / config_name(c)
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps(MODELS[c["model"]]))
    got = estimate(load_recipe(tmp / "r.toml", recipe_text(str(model_dir), c)), MODELS[c["model"]], 141.0)
    return got.peak_device_gib, got.uncertainty


def main() -> None:
    measured = {}
    if len(sys.argv) > 1:
        for line in Path(sys.argv[1]).read_text().splitlines():
            row = json.loads(line)
            measured[row["name"]] = row
    with tempfile.TemporaryDirectory() as tmp:
        for c in HOLDOUT:
            peak, uncertainty = predicted(c, Path(tmp))
            row = measured.get(config_name(c))
            seen = ""
            if row is not None and row.get("status") == "ok":
                seen = f"  measured {row['nvml_peak_gib']:6.2f}  error {peak / row['nvml_peak_gib'] - 1:+.1%}"
            elif row is not None:
                seen = f"  {row.get('status')}: {row.get('error', '')[:80]}"
            print(f"{config_name(c):52s} estimate {peak:6.2f} GiB (±{uncertainty:.0%}){seen}")


if __name__ == "__main__":
    main()
