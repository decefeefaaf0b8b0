"""Following the trainer's output files into `Output` events, with bounded memory and bounded files.

The trainer writes `trainer.{stdout,stderr}.log` itself (so a killed supervisor cannot break its pipes);
the supervisor tails them. A line with no newline (a `\\r` progress bar redrawing for hours) must not grow
without bound: only the last redraw of a `\\r` line is kept, and a line longer than `MAX_PENDING` is cut.
A file over `MAX_FILE` is rotated the way logrotate's copytruncate does (the trainer's O_APPEND writes
land at the new end): one `.1` copy is kept, so at most twice `MAX_FILE` lies on disk per stream.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

MAX_PENDING = 64 << 10
MAX_FILE = 64 << 20
MAX_LINE = 2000
POLL_S = 0.25


def last_redraw(raw: bytes) -> str:
    """A line as a terminal would leave it: a progress bar redrawn with \\r keeps its last state."""
    parts = [p for p in raw.split(b"\r") if p.strip()] or [b""]
    return parts[-1].decode("utf-8", "replace")[:MAX_LINE]


class OutputFollower:
    """Tails one output file from its current end, handing whole lines to `emit` until `done` is set."""

    def __init__(self, path: Path, emit: Callable[[list[str]], None], max_file: int = MAX_FILE,
                 redraw: Callable[[str], None] | None = None) -> None:
        """`max_file` 0: another follower of the file rotates it (this one reads it again from its start when it
        finds it cut)."""
        self.path = path
        self.emit = emit
        self.max_file = max_file
        self.redraw = redraw
        """Given each new complete redraw of a `\\r` line still being drawn (a watched command's tqdm bar)."""
        self.pending = b""
        self._redrawn = b""
        self.written: float | None = None
        """When the file was last written as of the last read (its mtime): the time the last line read was written,
        which the time it was read (a poll later, or many when the reader was slow) is not."""

    def run(self, done: threading.Event) -> None:
        follow_together([self], done)

    def _read(self, handle: BinaryIO, finished: bool) -> None:
        """What was written since the last read; the rest at the end; a file grown too large rotated."""
        if not self.max_file and handle.tell() > os.fstat(handle.fileno()).st_size:
            handle.seek(0)  # the other follower rotated it (copytruncate)
        data = handle.read(MAX_FILE)
        if data:
            with contextlib.suppress(OSError):
                self.written = os.fstat(handle.fileno()).st_mtime
        self.feed(data)
        if finished:
            self.flush()
        elif self.max_file and handle.tell() >= self.max_file:
            self._rotate(handle)

    def feed(self, data: bytes) -> None:
        """Emit the whole lines in `data`; keep (a bounded) rest for the next call."""
        lines, _, self.pending = (self.pending + data).rpartition(b"\n")
        if lines:
            self.emit([last_redraw(raw) for raw in lines.split(b"\n")])
        if self.redraw is not None and b"\r" in self.pending:
            head = self.pending[:self.pending.rfind(b"\r")]  # what follows the last \r may be half-written
            latest = head[head.rfind(b"\r") + 1:]
            if latest.strip() and latest != self._redrawn:
                self._redrawn = latest
                self.redraw(latest.decode("utf-8", "replace")[:MAX_LINE])
        if len(self.pending) > MAX_PENDING:
            # No newline for a long while: keep the last redraw only, and cut a runaway line.
            self.pending = self.pending[self.pending.rfind(b"\r") + 1:][-MAX_PENDING:]

    def flush(self) -> None:
        if self.pending.strip():
            self.emit([last_redraw(self.pending)])
        self.pending = b""

    def _rotate(self, handle: BinaryIO) -> None:
        """copytruncate: keep one `.1` copy, empty the file; our read offset starts again at 0."""
        rotated = self.path.with_name(self.path.name + ".1")
        try:
            shutil.copyfile(self.path, rotated)
            self.feed(handle.read())  # what came since the last read: otherwise only in the copy
            with open(self.path, "r+b") as trunc:
                trunc.truncate(0)  # (a line written between that read and this is lost: copytruncate's gap)
        except OSError:
            return  # a full disk: keep following, rotate later
        handle.seek(0)


def follow_together(followers: list[OutputFollower], done: threading.Event,
                    starts: list[int] | None = None, after_round: Callable[[], None] | None = None) -> None:
    """Tail several files in one loop, each read in turn, in the order given, until `done` is set. A command's
    stdout and stderr in one thread, stdout first: a traceback printed after the last step's line is read after it
    (two threads each polling a file read the traceback of a crash before the five steps printed just before it,
    and the failure was placed at step 20 of 25). `starts`: where in each file to begin (else at its end);
    `after_round`: called after each round but the last (every file read to its end as it was when the round
    began)."""
    with contextlib.ExitStack() as stack:
        handles = [stack.enter_context(open(f.path, "rb")) for f in followers]
        for index, handle in enumerate(handles):
            if starts is None:
                handle.seek(0, os.SEEK_END)
            else:
                handle.seek(starts[index])
        while True:
            finished = done.is_set()
            for follower, handle in zip(followers, handles):
                follower._read(handle, finished)
            if finished:
                return
            if after_round is not None:
                after_round()
            done.wait(POLL_S)


def follow_streams(stdout: Path, stderr: Path, emit: Callable[..., None], done: threading.Event,
                   redraw: Callable[[str], None] | None = None, starts: list[int] | None = None,
                   max_file: int = MAX_FILE, after_round: Callable[[], None] | None = None,
                   timed: bool = False) -> threading.Thread:
    """A started thread tailing a trainer's stdout then stderr (`follow_together`) until `done`: `emit(stream, lines)`
    with "stdout" or "stderr" (`timed`: `emit(stream, lines, written)`, the file's mtime when they were read, the
    time the last of them was written: `OutputFollower.written`); `redraw` is given each redraw of a bar still being
    drawn; `starts`, `max_file` and `after_round` as `follow_together` and `OutputFollower` take them."""
    followers = []
    for path, name in ((stdout, "stdout"), (stderr, "stderr")):
        follower = OutputFollower(path, functools.partial(emit, name), max_file=max_file, redraw=redraw)
        if timed:
            follower.emit = functools.partial(_emit_written, emit, name, follower)
        followers.append(follower)
    thread = threading.Thread(target=follow_together, args=(followers, done, starts, after_round), daemon=True)
    thread.start()
    return thread


def _emit_written(emit: Callable[..., None], name: str, follower: OutputFollower, lines: list[str]) -> None:
    emit(name, lines, follower.written)
