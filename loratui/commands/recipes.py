"""`loratui recipes`: the recipes shipped inside the package, one line each (model, method, the card).

Each built-in recipe says which card it fits on a `# fits: ...` comment line of its header: the figure
lives next to the settings it depends on, and a copy made with `loratui init` keeps it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(sub: Any, runs_dir_parent: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the `recipes` subparser."""
    cmd: argparse.ArgumentParser = sub.add_parser(
        "recipes", help="list the built-in recipes (loratui run NAME, loratui init NAME)")
    return cmd


def main(args: argparse.Namespace) -> int:
    """Print one line per built-in recipe."""
    from loratui.recipe import builtin_recipes

    rows = [describe(path) for path in builtin_recipes().values()]
    widths = [max(len(row[i]) for row in [HEADER, *rows]) for i in range(len(HEADER) - 1)]
    for row in [HEADER, *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1])
    print("\nrun one: loratui run NAME    copy one out to edit: loratui init NAME [PATH]")
    return 0


HEADER = ("NAME", "MODEL", "METHOD", "FITS")


def describe(path: Path) -> tuple[str, str, str, str]:
    """(name, model, method, fits) of the recipe at `path`."""
    from loratui.recipe import load_recipe

    text = path.read_text(encoding="utf-8")
    recipe = load_recipe(path, text)
    return path.stem, recipe.model.path, method(recipe), fits(text)


def method(recipe: Any) -> str:
    """How the recipe trains, in the words people use: QLoRA 4-bit, LoRA 8-bit, LoRA bfloat16, DoRA..."""
    adapter = "DoRA" if recipe.lora.use_dora else "LoRA"
    q = recipe.quantization
    if q.load_in_4bit:
        text = f"Q{adapter} 4-bit {q.bnb_4bit_quant_type.upper()}"
    elif q.load_in_8bit:
        text = f"{adapter} 8-bit"
    else:
        text = f"{adapter} {recipe.model.dtype}"
    text += f", r={recipe.lora.r}"
    processes = recipe.distributed.num_processes
    if processes != 1:
        text += f", {processes} processes ({recipe.distributed.strategy})"
    return text


def fits(text: str) -> str:
    """The `# fits: ...` line of a recipe's header comments, or '?' where there is none."""
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        if line.startswith("# fits:"):
            return line.removeprefix("# fits:").strip()
    return "?"
