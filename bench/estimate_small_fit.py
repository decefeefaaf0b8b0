"""Refit the estimator's context and allocator-slack base on the small grid's FIT half plus the large-model rows.

Never reads the HOLDOUT half of bench/estimate_small.jsonl (`estimate_grid.small_half`). Searches CONTEXT_GIB and
SLACK_BASE_SHARE (the base slack is that share of the allocated peak, at most SLACK_BASE) on a grid, minimising the
sum of squared relative errors of the device-used peak over the FIT half, bench/estimate_grid.jsonl and
bench/estimate_holdout.jsonl, and prints every one of those rows before and after:

    python bench/estimate_small_fit.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))
from estimate_grid import SMALL, config_name, small_half
from test_estimate import recipe_text

from loratui.logic import estimate as est
from loratui.recipe import load_recipe

FIT_NAMES = {config_name(c) for c in SMALL if small_half(c) == "fit"}


def fit_rows() -> list[tuple[str, dict]]:
    """(source, row) of every measured row the fit may see: the small grid's FIT half and the large-model rows."""
    out = []
    for line in (ROOT / "bench" / "estimate_small.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["name"] in FIT_NAMES:  # the HOLDOUT half is never loaded here
            out.append(("small-fit", row))
    for source in ("estimate_grid", "estimate_holdout"):
        for line in (ROOT / "bench" / f"{source}.jsonl").read_text().splitlines():
            row = json.loads(line)
            if row.get("status") == "ok":
                out.append((source, row))
    return out


def prepared(rows: list[tuple[str, dict]]) -> list[tuple[str, dict, est.Dims, est.Setup]]:
    """Each row with the dimensions and setup its recipe gives."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for source, row in rows:
            text = recipe_text("m", row["quant"], row["batch"], row["seq"], row["gc"], row["optim"], row["attn"],
                               row["r"], row.get("targets"), row.get("dropout", 0.05))
            setup = est.read_setup(load_recipe(Path(tmp) / "r.toml", text))
            out.append((source, row, est.read_dims(row["model_config"]), setup))
    return out


def errors(table: list, context: float, share: float) -> list[float]:
    """Relative error of the device-used peak per row under the given constants."""
    saved = est.CONTEXT_GIB, est.SLACK_BASE_SHARE
    est.CONTEXT_GIB, est.SLACK_BASE_SHARE = context, share
    try:
        return [est.estimate_setup(d, s).peak_device_gib / row["nvml_peak_gib"] - 1 for _, row, d, s in table]
    finally:
        est.CONTEXT_GIB, est.SLACK_BASE_SHARE = saved


def main() -> None:
    table = prepared(fit_rows())
    before = errors(table, 1.40, 1e9)  # the constants as they were
    best = min((sum(e * e for e in errors(table, c / 100, f / 1000)), c / 100, f / 1000)
                for c in range(110, 151) for f in range(0, 501, 5))
    _, context, share = best
    after = errors(table, context, share)
    print(f"fitted: CONTEXT_GIB = {context:.2f}, SLACK_BASE_SHARE = {share:.3f} "
          f"(rows: {len(table)}, sum of squared relative errors {best[0]:.4f})")
    for (source, row, _, _), b, a in zip(table, before, after, strict=True):
        print(f"{source:16s} {row['name'][:52]:52s} measured {row['nvml_peak_gib']:6.2f}  error {b:+6.1%} -> {a:+6.1%}")


if __name__ == "__main__":
    main()
