"""`loratui estimate RECIPE`: the predicted VRAM peak of a recipe, from the model's config.json alone.

Module-level imports stay light: this module is imported whenever the CLI parses its arguments.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def register(sub: Any, runs_dir_parent: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the `estimate` subparser."""
    cmd = sub.add_parser("estimate", help="predict a recipe's VRAM peak from the model's config.json")
    cmd.add_argument("recipe", type=Path, help="a recipe file, or a built-in recipe's name")
    cmd.add_argument("--gpu-gb", type=float, default=32.0, help="card memory in GiB to judge against (32)")
    cmd.add_argument("--json", action="store_true", help="print the estimate as one JSON object")
    cmd.add_argument("--model-path", default=None, help="overrides [model] path (a local model directory)")
    return cmd


def main(args: argparse.Namespace) -> int:
    """Print the estimate (and the what-would-fit table) for the recipe."""
    from loratui.errors import EXIT_NO, EXIT_OK, UsageError
    from loratui.logic.estimate import ConfigError, estimate, fit_table
    from loratui.recipe import find_recipe

    args.recipe = find_recipe(args.recipe)
    result, recipe, config, config_path = compute(args.recipe, args.gpu_gb, args.model_path)
    try:
        table = [] if args.json else fit_table(recipe, config, args.gpu_gb)
    except ConfigError as exc:
        raise UsageError(f"{config_path}: {exc}") from None
    warn_gib = recipe.monitor.warn_gb
    print(json.dumps(result.as_json() | {"verdict": verdict(result, warn_gib)}) if args.json
          else render(result, table, config_path, warn_gib, fp32=recipe.model.dtype == "float32",
                      cpu_gib=estimate(recipe, config, cuda=False).peak_device_gib,
                      shape=(recipe.training.per_device_train_batch_size, recipe.data.max_length)))
    return EXIT_NO if verdict(result, warn_gib) == "does NOT fit" else EXIT_OK


def compute(recipe_path: Path, gpu_gib: float, model_path: str | None = None) -> tuple[Any, Any, dict[str, Any], Path]:
    """(estimate, recipe, model config, config path) for a recipe file on a card of `gpu_gib`."""
    from loratui.errors import UsageError
    from loratui.logic.estimate import ConfigError, estimate
    from loratui.recipe import load_recipe

    recipe = load_recipe(recipe_path, model_path=model_path)  # the override before the checks
    if not 0 < gpu_gib < 1e6:  # nan and inf too: "fits, headroom +nan" answered nothing
        raise UsageError(f"--gpu-gb {gpu_gib}: the card's memory must be a positive number of GiB (80 for an "
                         "80 GB card)")
    config_path = find_config(model_path or recipe.model.path, recipe_path.resolve().parent)
    config = read_config(config_path)
    try:
        return estimate(recipe, config, gpu_gib), recipe, config, config_path
    except ConfigError as exc:
        raise UsageError(f"{config_path}: {exc}") from None


def verdict(result: Any, warn_gib: float) -> str:
    """'fits', 'tight' (the error band crosses the card or the warning line) or 'does NOT fit'."""
    low, high = (result.peak_device_gib * (1 + sign * result.uncertainty) for sign in (-1, 1))
    if low > result.gpu_gib:
        return "does NOT fit"
    if high > result.gpu_gib or high > warn_gib:
        return "tight"
    return "fits"


def find_config(model_path: str, recipe_dir: Path) -> Path:
    """The config.json of a model path: the tiny model's, a local directory's, or a clear error."""
    from loratui.errors import UsageError
    from loratui.recipe import TINY_MODEL

    if model_path == TINY_MODEL:
        from loratui.trainer.tiny import TINY_VERSION, cache_dir, ensure_tiny_model

        cached = cache_dir() / f"tiny-qwen2-{TINY_VERSION}" / "config.json"
        return cached if cached.exists() else ensure_tiny_model() / "config.json"
    local = Path(model_path).expanduser()
    if not local.is_absolute() and (recipe_dir / local).exists():
        local = recipe_dir / local
    if not local.exists():
        known = hub_config(model_path)
        if known is not None:
            return known
        raise UsageError(f"model {model_path!r} is not a local directory; estimate reads only its config.json: "
                         "pass --model-path /path/to/model (a directory holding config.json)")
    config = local / "config.json" if local.is_dir() else local
    if not config.is_file():
        raise UsageError(f"{config}: no config.json there; point --model-path at the model directory "
                         "(the one holding config.json; weights are not needed)")
    return config


SHIPPED = Path(__file__).resolve().parent.parent / "model_configs"


def hub_config(repo_id: str) -> Path | None:
    """A hub model's config.json: the local hub cache's, else the copy loratui ships for the recipes'
    models (shape facts only), else None."""
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(repo_id, "config.json")
        if isinstance(cached, str):
            return Path(cached)
    except Exception:  # no huggingface_hub, or an id it rejects: fall through to the shipped copies
        pass
    shipped = SHIPPED / (repo_id.replace("/", "--") + ".json")
    return shipped if "/" in repo_id and shipped.is_file() else None


def read_config(path: Path) -> dict[str, Any]:
    """The parsed config.json, or a one-line UsageError."""
    from loratui import bounds
    from loratui.errors import UsageError

    try:
        config = json.loads(bounds.read_text(path))
    except (OSError, ValueError, RecursionError) as exc:  # JSON's errors, bad UTF-8, 5000 digits, deep
        raise UsageError(f"{path}: cannot read it as JSON ({exc})") from None
    if not isinstance(config, dict):
        raise UsageError(f"{path}: expected a JSON object")
    return config


LABELS = {
    "weights_16bit": "base weights (16-bit)", "weights_quantized": "base weights (4-bit, with constants)",
    "weights_fp32_upcast": "embeddings/lm_head/norms (fp32 upcast)", "lora_params": "LoRA parameters (fp32)",
    "gradients": "LoRA gradients (fp32)", "optimizer_states": "optimizer states",
    "optimizer_paged": "optimizer states, paged (CUDA managed)", "activations": "activations",
    "logits": "logits and loss", "allocator_slack": "allocator slack (reserved - allocated)",
    "cuda_context_non_torch": "CUDA context and non-torch",
}


def render(result: Any, table: list[Any], config_path: Path, warn_gib: float = 30.0, fp32: bool = False,
           cpu_gib: float | None = None, shape: tuple[int, int] | None = None) -> str:
    """The plain-text report: breakdown, verdict, and the what-would-fit table. `fp32`: the recipe loads
    the model in float32 ([model] dtype), so its unquantised weights take 4 bytes each. `cpu_gib`: the same
    training on CPU, said as the app says a CPU run's estimate (its panes show that one, not the GPU's).
    `shape`: (batch, max_length) the figures are for; a run estimates again at its data's longest example,
    so its pane may say less, and the reader must know why the two differ."""
    from loratui.logic.fmt import article
    from loratui.units import size

    labels = LABELS | ({"weights_16bit": "base weights (fp32)"} if fp32 and "weights_quantized" not in
                       result.components else {})
    lines = [f"model config: {config_path}"]
    if shape is not None:
        lines += [f"at batch {shape[0]} x {shape[1]} tokens ([data] max_length)",
                  "(a run estimates again at its data's longest example, which may be shorter)"]
    lines.append("")
    lines += [f"  {labels.get(k, k):44s} {v:8.2f} GiB" for k, v in result.components.items() if v >= 0.005]
    lines += ["", f"  {'peak torch reserved':44s} {result.peak_reserved_gib:8.2f} GiB",
              f"  {'peak used on a CUDA GPU (NVML; decides OOM)':44s} {result.peak_device_gib:8.2f} GiB"
              f"  (±{result.uncertainty:.0%})"]
    if cpu_gib is not None:  # a CPU run holds no CUDA context and its allocator caches nothing
        lines.append(f"  {'on CPU (no CUDA context or slack)':44s} {size(cpu_gib):>12s}")
    said = verdict(result, warn_gib)
    card = f"{result.gpu_gib:g}"
    if warn_gib < result.gpu_gib:
        line = f"warning line {warn_gib:g} GiB"
    else:  # a line above the card never decides anything: the card does
        line = f"warning line {warn_gib:g} GiB is above the card, so the card decides ([monitor] warn_gb)"
    lines.append(f"  on {article(card)} {card} GiB card, {line}: {said}{_why_tight(result, warn_gib, said)}, "
                 f"headroom {result.headroom_gib:+.2f} GiB")
    lines += [f"  note: {n}" for n in result.notes]
    if table:
        seqs = list(table[0].max_batch)
        width = max(34, *(len(row.label) for row in table))
        lines += ["", f"what would fit on {result.gpu_gib:g} GiB (largest batch per sequence length; 0 = none):",
                  f"  {'':{width}s}" + "".join(f"{s:>7d}" for s in seqs)]
        lines += [f"  {row.label:{width}s}" + "".join(f"{_batch_cell(row.max_batch[s]):>7s}" for s in seqs)
                  for row in table]
    return "\n".join(lines)


def _why_tight(result: Any, warn_gib: float, said: str) -> str:
    """What a 'tight' verdict crosses: the card, or the warning line below it."""
    if said != "tight":
        return ""
    high = result.peak_device_gib * (1 + result.uncertainty)
    return " (the error band crosses the card)" if high > result.gpu_gib else " (the error band crosses the warning line)"


def _batch_cell(batch: int) -> str:
    """A table cell: the batch, with '+' when even the largest batch tried fits."""
    from loratui.logic.estimate import FIT_BATCHES

    return f"{batch}+" if batch == FIT_BATCHES[-1] else str(batch)
