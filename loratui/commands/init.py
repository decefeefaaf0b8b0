"""`loratui init NAME [PATH]`: copy a built-in recipe out to edit (never over an existing file).

The copy's relative `data.path` would point at nothing outside the package, so it is rewritten to the
shipped file's absolute path: the copy runs as it is, and the line says what to replace.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(sub: Any, runs_dir_parent: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the `init` subparser."""
    cmd: argparse.ArgumentParser = sub.add_parser(
        "init", help="copy a built-in recipe out to edit (loratui recipes lists them)")
    cmd.add_argument("name", help="a built-in recipe: tiny, qwen7b, ... (see `loratui recipes`)")
    cmd.add_argument("path", nargs="?", default=None,  # a str: Path() drops the trailing slash that says "a folder"
                     help="where to write it: a file, or a folder for NAME.toml (default ./NAME.toml)")
    return cmd


def main(args: argparse.Namespace) -> int:
    """Write the copy, refusing to overwrite anything."""
    from loratui.errors import UsageError
    from loratui.recipe import builtin_recipes

    builtins = builtin_recipes()
    name = args.name.removesuffix(".toml")
    if name not in builtins:
        raise UsageError(f"{args.name}: no built-in recipe of that name; choose one of {', '.join(builtins)}")
    source = builtins[name]
    target = _target(args.path, name)
    text = copy_text(source)
    try:
        with open(target, "x", encoding="utf-8") as out:  # O_EXCL: never over a file, nor through a link
            out.write(text)
    except FileExistsError:
        raise UsageError(f"{target}: already exists; not overwritten (give another PATH, or move that file "
                         "away)") from None
    except OSError as exc:
        raise UsageError(f"{target}: cannot write the recipe there ({exc.strerror})") from None
    print(f"wrote {target} (from the built-in {name!r}); edit it, then: loratui run {target}")
    if text != source.read_text(encoding="utf-8"):
        print("  its data.path points at loratui's shipped demo data: replace it with your own")
    return 0


def _target(given: str | None, name: str) -> Path:
    if given is None:
        return Path(f"{name}.toml")
    path = Path(given).expanduser()
    if path.is_dir():
        return path / f"{name}.toml"
    if given.endswith(("/", "\\")):  # `init tiny configs/` wrote a file named `configs`
        from loratui.errors import UsageError

        raise UsageError(f"{given}: no such folder; make it first (mkdir -p {given}) or name the file "
                         f"({given}{name}.toml)")
    return path


def copy_text(source: Path) -> str:
    """The recipe's text with a relative `data.path` made absolute (it is relative to the package)."""
    from loratui.logic.recipe_edit import absolute_data_path

    return absolute_data_path(source.read_text(encoding="utf-8"), str(source.parent.resolve()))
