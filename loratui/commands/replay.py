"""`loratui replay RUN [RUN_B] [--speed X] [--from STEP] [--headless --summary]`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def register(sub: Any, runs_dir: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the `replay` subcommand."""
    parser = sub.add_parser("replay", parents=[runs_dir], help="play a recorded run back (or compare two)")
    parser.add_argument("run", help="run id, name or directory; an events.jsonl; a trainer_state.json, "
                                    "a Trainer output directory or a Trainer stdout log")
    parser.add_argument("compare", nargs="?", default=None, help="a second run to overlay")
    parser.add_argument("--speed", type=float, default=10.0, help="x1 … x1000 (default x10)")
    parser.add_argument("--from", dest="from_step", type=int, default=None, help="start at this step")
    parser.add_argument("--headless", action="store_true", help="no TUI")
    parser.add_argument("--summary", action="store_true", help="with --headless: print a JSON summary")
    return parser


def main(args: argparse.Namespace) -> int:
    """Open the replay (or print its summary)."""
    from loratui.errors import UsageError

    if not 1 <= args.speed <= 1000:
        raise UsageError(f"--speed {args.speed:g}: use a speed from 1 to 1000")
    found, notes, title, recipe = _open(args.run, args.runs_dir)
    if args.headless or args.summary:
        return _print_summary(found, notes, recipe, args.compare, args.runs_dir)
    compare = None
    if args.compare:
        from loratui.logic.runstate import RunState

        other, _, other_title, _ = _open(args.compare, args.runs_dir)
        compare = RunState().feed_all(other)
        compare.name = compare.name or other_title
    from loratui.tui.replay_app import replay_app

    app = replay_app(found, recipe, title, args.speed, args.from_step, compare, notes,
                     follow=_tail_if_running(args.run, args.runs_dir, found))
    app.run()
    return 0


def _tail_if_running(target: str, runs_dir: Path, found: list[Any]) -> Any:
    """A tail positioned after `found` when the run is still being written, else None."""
    from loratui import rundir
    from loratui.eventlog import LogTail

    try:
        run = rundir.resolve(target, runs_dir)
    except rundir.RunNotFound:
        return None
    if run.supervisor_pid() is None:
        return None
    tail = LogTail(run.events)
    backlog = tail.poll(max_bytes=None)[len(found):]  # written since `found` was read
    return _Follow(tail, backlog)


class _Follow:
    """New events of a run still being written: first those that came while opening, then the tail's."""

    def __init__(self, tail: Any, backlog: list[Any]) -> None:
        self.tail, self.backlog = tail, backlog

    def poll(self) -> list[Any]:
        """Events not yet handed to the replay."""
        more: list[Any] = self.backlog + self.tail.poll()
        self.backlog = []
        return more


def _open(target: str, runs_dir: Path) -> tuple[list[Any], str, str, Any]:
    """(events, notes, title, recipe or None); bad input becomes one UsageError line."""
    from loratui import rundir
    from loratui.sources import importers
    from loratui.errors import UsageError
    from loratui.sources.open_any import open_any

    if "/" in target and not Path(target).exists():
        raise UsageError(f"{target}: no such file or directory (replay takes a run id, a run directory, "
                         "an events.jsonl, a trainer_state.json, a Trainer output dir or a stdout log)")
    try:
        found, notes, title = open_any(target, runs_dir)
    except importers.ImportFailed as exc:
        raise UsageError(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{target}: cannot read ({exc})") from None
    if not found:
        raise UsageError(f"{target}: the log holds no readable event; nothing to replay")
    return found, notes, title, _recipe_of(target, runs_dir, rundir)


def _recipe_of(target: str, runs_dir: Path, rundir: Any) -> Any:
    """The run's recipe copy, when the target is a run (advice then knows the recipe)."""
    from loratui.recipe import RecipeError, load_recipe

    path = Path(target)
    candidates = [path / "recipe.toml", path.parent / "recipe.toml"]
    try:
        candidates.append(rundir.resolve(target, runs_dir).recipe)
    except rundir.RunNotFound:
        pass
    for candidate in candidates:
        if candidate.is_file():
            try:
                return load_recipe(candidate)
            except RecipeError:
                return None
    return None


def _print_summary(found: list[Any], notes: str, recipe: Any, compare: str | None, runs_dir: Path) -> int:
    from loratui.logic.runstate import RunState
    from loratui.logic.summary import diagnose, summarize

    summary = summarize(RunState().feed_all(found), notes, diagnose(found, recipe))
    if compare:
        other, other_notes, _, other_recipe = _open(compare, runs_dir)
        summary = {"a": summary, "b": summarize(RunState().feed_all(other), other_notes,
                                                 diagnose(other, other_recipe))}
    print(json.dumps(summary, indent=2))
    return 0
