"""`loratui replay RUN [RUN_B] [--speed X] [--from STEP] [--headless --summary]`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def register(sub: Any, runs_dir: argparse.ArgumentParser) -> None:
    """Add the `replay` subcommand."""
    parser = sub.add_parser("replay", parents=[runs_dir], help="play a recorded run back (or compare two)")
    parser.add_argument("run", help="run id, name or directory; an events.jsonl; a trainer_state.json, "
                                    "a Trainer output directory or a Trainer stdout log")
    parser.add_argument("compare", nargs="?", default=None, help="a second run to overlay")
    parser.add_argument("--speed", type=float, default=10.0, help="x1 … x1000 (default x10)")
    parser.add_argument("--from", dest="from_step", type=int, default=None, help="start at this step")
    parser.add_argument("--headless", action="store_true", help="no TUI")
    parser.add_argument("--summary", action="store_true", help="with --headless: print a JSON summary")


def main(args: argparse.Namespace) -> int:
    """Open the replay (or print its summary)."""
    from loratui.errors import UsageError
    from loratui.eventlog import read_log  # noqa: F401  (keeps the import cost here, not at parse)

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
        more, self.backlog = self.backlog + self.tail.poll(), []
        return more
