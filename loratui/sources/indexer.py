"""Keeps a run's `events.idx` current while the run goes: `python -m loratui.sources.indexer RUN_DIR`.

The supervisor starts it (by module name, as it starts the trainer: the owner side imports no reader) with
a pipe on its stdin, and closes the pipe after the run's end event; a supervisor killed outright closes it
too. Every `INTERVAL_S` it indexes what the log gained (a few seconds of events: about a millisecond of
CPU) and saves the index when the log grew by a tenth since the last save (`IndexedLog.follower`: a 1 GB
log's index is ~60 MB, too much to write every few seconds); at the end it indexes the rest, saves, and
exits. So a loratui run's log has its index by the time anyone replays it, and a replay after a crash
extends the saved index by at most a tenth of the log.

A process of its own, at a lower priority, rather than a thread of the supervisor: the supervisor's
threads (the sampler, the event writer, the control socket) never wait for its GIL, and its memory (the
folded curves of a long run, ~650 MiB at 1 GB of log) is never the owner's.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import IO, Any

from loratui.rundir import RunDir
from loratui.sources.logindex import IndexedLog

INTERVAL_S = 5.0


def open_log(run: RunDir) -> tuple[IndexedLog, str]:
    """The run's log with its saved index (if one fits) and the recipe text it was keyed with."""
    text = recipe_text(run)
    recipe = run.load_recipe()[0]  # what `loratui replay` keys the index with: advice depends on it
    log = IndexedLog.of_file(run.events, recipe)
    log.follower = True
    return log, text


def recipe_text(run: RunDir) -> str:
    try:
        return run.recipe.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def follow(run: RunDir, done: threading.Event, interval: float = INTERVAL_S) -> IndexedLog:
    """Index the log every `interval` until `done`; then the rest, and save."""
    log, text = open_log(run)
    while True:
        if recipe_text(run) != text:  # a watched run's hooked Trainer wrote its live settings
            log, text = open_log(run)
        log.update()
        if done.wait(interval):
            break
    log.update()
    log.save()
    return log


def wait_for_eof(stream: IO[bytes], done: threading.Event) -> None:
    """Set `done` when the supervisor closes the pipe (or dies)."""
    try:
        while stream.read(4096):
            pass
    finally:
        done.set()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        os.nice(10)  # behind the trainer and the supervisor whenever the CPU is short
    except OSError:
        pass
    done = threading.Event()
    stdin: Any = sys.stdin.buffer
    threading.Thread(target=wait_for_eof, args=(stdin, done), daemon=True).start()
    try:
        follow(RunDir(Path(args[0])), done)
    except OSError:
        return 1  # the run directory went away: a replay builds the index itself
    return 0


if __name__ == "__main__":
    sys.exit(main())
