"""`loratui recipes`: the recipes shipped inside the package, one line each (model, method, the card).

Each built-in recipe says which card it fits on a `# fits: ...` comment line of its header: the figure
lives next to the settings it depends on, and a copy made with `loratui init` keeps it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from loratui.text import terminal_width, wrap_line


def register(sub: Any, runs_dir_parent: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the `recipes` subparser."""
    cmd: argparse.ArgumentParser = sub.add_parser(
        "recipes", help="list the built-in recipes (loratui run NAME, loratui init NAME)")
    return cmd


def main(args: argparse.Namespace) -> int:
    """Print one line per built-in recipe."""
    from loratui.recipe import builtin_recipes

    rows = [describe(path) for path in builtin_recipes().values()]
    for line in table([HEADER, *rows], terminal_width(sys.stdout)):
        print(line)
    print("\nrun one: loratui run NAME    copy one out to edit: loratui init NAME [PATH]")
    return 0


def table(rows: list[tuple[str, ...]], width: int) -> list[str]:
    """The rows in aligned columns, the card last. On a terminal (`width` > 0) too narrow for a row, the card
    folds between words in its own column or, where that column would be too narrow to read, on lines of its
    own under the model: the terminal's own wrap cut it mid-word back at column 0, under NAME."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    heads = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " for row in rows]
    if not width or all(len(head + row[-1]) < width for head, row in zip(heads, rows)):
        return [head + row[-1] for head, row in zip(heads, rows)]
    if width - len(heads[0]) > 20:
        return [line for head, row in zip(heads, rows) for line in _folded(head, row[-1], width)]
    under = " " * (widths[0] + 2)
    lines = [heads[0].rstrip()]
    for head, row in zip(heads[1:], rows[1:]):
        lines += [head.rstrip(), *_folded(under, f"fits {row[-1]}", width)]
    return lines


def _folded(head: str, text: str, width: int) -> list[str]:
    folded = wrap_line(text, width - 1 - len(head), "").split("\n")
    return [head + folded[0], *(" " * len(head) + rest for rest in folded[1:])]


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
