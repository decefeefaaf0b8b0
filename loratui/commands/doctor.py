"""`loratui doctor PATH [--json]`: diagnose a run directory, an events.jsonl, or a pasted log/traceback.

A run directory is read through its recipe copy and event log, so the advice is the same as the live
panel's. Any other file is read as text: each line becomes trainer output, and the Trainer's printed log
dicts (`{'loss': ..., 'grad_norm': ...}`) become log events numbered by their order in the file.
Imports stay light here: this module loads whenever the CLI parses.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path
from typing import Any


def register(sub: Any, runs_dir_parent: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the `doctor` subparser."""
    doctor = sub.add_parser("doctor", parents=[runs_dir_parent],
                            help="diagnose a run, its events.jsonl, or a pasted log or traceback")
    doctor.add_argument("path", help="a run directory, run id, events.jsonl, or a text log/traceback file")
    doctor.add_argument("--json", action="store_true", help="print the advice as a JSON list")
    return doctor


def main(args: argparse.Namespace) -> int:
    """Print the advice for `args.path`; exit 0 whether or not there is any."""
    from loratui.errors import UsageError

    source = _resolve(Path(args.path), getattr(args, "runs_dir", None))
    if source is None:
        raise UsageError(f"{args.path}: no such file, run directory or run id")
    try:
        items, note = diagnose(source)
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{source}: cannot read it ({exc})") from None
    if args.json:
        import json

        print(json.dumps([item.to_dict() for item in items], indent=2, default=str))
    else:
        print(render(items, source, note))
    return 0


def _resolve(path: Path, runs_dir: Path | None) -> Path | None:
    """The run directory or file PATH names: a path first, else a run id under --runs-dir."""
    if path.is_dir() or path.is_file():
        return path
    if runs_dir is None or path.name != str(path):
        return None
    from loratui import rundir

    try:
        return rundir.resolve(str(path), runs_dir).path
    except rundir.RunNotFound:
        return None


def diagnose(source: Path) -> tuple[list[Any], str]:
    """The advice for a run directory, an event log or a text file, and a note on what was read."""
    from loratui.logic.advice import Advisor

    if source.is_dir():
        log = source / "events.jsonl"
        if not log.is_file():
            raise OSError(f"no events.jsonl in {source}")
        return _from_events(log, _run_recipe(source / "recipe.toml"))
    if source.name == "events.jsonl" or _looks_like_events(source):
        return _from_events(source, _run_recipe(source.parent / "recipe.toml"))
    text = source.read_text(encoding="utf-8", errors="replace")
    advisor = Advisor(None).feed_all(text_events(text.splitlines()))
    return advisor.items(), f"{len(text.splitlines())} lines read as trainer output (no recipe)"


def _from_events(log: Path, recipe: Any) -> tuple[list[Any], str]:
    from loratui.eventlog import read_log
    from loratui.logic.advice import Advisor

    if not log.is_file():
        raise OSError(f"{log} is not a file")
    contents = read_log(log)
    items = Advisor(recipe).feed_all(contents.events).items()
    note = f"{len(contents.events)} events read" + ("" if recipe else ", no usable recipe.toml")
    extra = contents.notes()
    return items, note + (f"; {extra}" if extra else "")


def _looks_like_events(path: Path) -> bool:
    """Whether a file's first line is an event-log header."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline(4096)
    except OSError:
        return False
    return first.startswith(b"{") and b'"kind":"header"' in first.replace(b" ", b"")


def _run_recipe(path: Path) -> Any:
    """The run's recipe copy; a copy that needs its command-line overrides is read without the checks."""
    import tomllib

    import msgspec

    from loratui.recipe import Recipe, RecipeError, load_recipe

    if not path.is_file():
        return None
    try:
        return load_recipe(path)
    except RecipeError:
        pass
    try:
        # `--model-path` leaves [model] path empty in the copy; the run was checked when it started.
        return msgspec.convert(tomllib.loads(path.read_text(encoding="utf-8")), Recipe)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, msgspec.ValidationError):
        return None


def text_events(lines: list[str]) -> list[Any]:
    """Lines of a pasted log as events: Trainer log dicts as `Log`, the rest as stderr `Output`."""
    from loratui import events

    found: list[Any] = []
    batch: list[str] = []
    logs = 0
    for line in lines:
        values = _trainer_dict(line)
        if values is None:
            batch.append(line)
            continue
        if batch:
            found.append(events.Output(t=0.0, stream="stderr", lines=batch))
            batch = []
        logs += 1
        found.append(events.Log(t=0.0, step=logs, values=values))
    if batch:
        found.append(events.Output(t=0.0, stream="stderr", lines=batch))
    return found


def _trainer_dict(line: str) -> dict[str, Any] | None:
    """The numbers of a printed Trainer log dict ("{'loss': '1.23', ...}"), or None."""
    from loratui import events

    text = line.strip()
    if not (text.startswith("{'") and text.endswith("}") and "'loss'" in text) or len(text) > 2000:
        return None
    try:
        raw = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(raw, dict):
        return None
    values: dict[str, Any] = {}
    for key, value in raw.items():
        number = _number(value)
        if isinstance(key, str) and number is not None:
            values[key] = events.num_out(number)
    return values if "loss" in values else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def render(items: list[Any], source: Path, note: str) -> str:
    """The advice as plain text, most important first."""
    if not items:
        return f"{source}: no problems found ({note})"
    lines = [f"{source}: {len(items)} finding{'s' if len(items) > 1 else ''} ({note})"]
    for item in items:
        lines.append(f"\n{item.severity.upper():<8}{item.id}  (step {item.step})\n  {item.title}")
        lines += [f"    - {line}" for line in item.evidence]
        if item.change:
            lines.append("  change: " + ", ".join(f"{key} = {_toml(value)}" for key, value in item.change.items()))
    return "\n".join(lines)


def _toml(value: Any) -> str:
    """A value as it would be written in the recipe."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)
