"""Where a run stands, without reading its whole log: one answer for `ls`, attach, restart and headless.

The supervisor keeps `status.json` current (a fold of the log it tails); a reader takes that file, folds
the log's last few hundred KiB over it (events newer than the file), and asks whether the supervisor or
the trainer still lives. A run with no end event and no live process is `lost`. A trainer whose
supervisor died trains on, obeys `control.cmds`, and writes its own end (see trainer/orphan.py), so every
view tells the truth within a poll.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import msgspec

from loratui import bounds, events
from loratui.rundir import RunDir, file_size, replace_file

TAIL_BYTES = 256 << 10
LOST = "lost"


class Status(msgspec.Struct, kw_only=True):
    """The few facts every list and view needs. `t` is the time of the newest event folded in."""

    state: str = events.STARTING
    step: events.Int = 0
    max_steps: events.Int = 0
    loss: events.Num = None
    """The last logged training loss (NaN travels as a string, as in the log)."""
    peak_used: events.Int = 0
    """The device-used peak over the run, bytes; 0 when no GPU was sampled."""
    gpu: bool | None = None
    estimate_gib: float | None = None
    end: events.End | None = None
    t: float = 0.0
    offset: events.Int = 0
    """Bytes of the log folded in (whole lines): a reader folds what follows. Not `t`: a wall clock set
    back makes newer events look older (a finished run's End was skipped and it showed `lost`)."""
    alive: str = ""
    """Who still runs it: "supervisor", "trainer" (its supervisor died), or "" (nobody)."""


def fold(status: Status, found: Iterable[events.AnyEvent], since: float = 0.0) -> Status:
    """`status` advanced by `found` (in log order), skipping events older than `since` (already folded)."""
    for e in found:
        if e.t < since:
            continue
        status.t = max(status.t, e.t)
        if isinstance(e, events.State) and status.end is None:
            status.state = e.state
            status.step = e.step if e.step is not None else status.step
        elif isinstance(e, events.End):
            status.end, status.state = e, e.state
            status.step = max(status.step, e.step)
        elif isinstance(e, events.Step):
            status.step = max(status.step, e.step)
        elif isinstance(e, events.Log):
            if e.values.get("loss") is not None:
                status.loss = e.values["loss"]
        elif isinstance(e, events.TrainBegin):
            status.max_steps = e.max_steps
        elif isinstance(e, events.Sample):
            status.peak_used = max(status.peak_used, e.used_max)
        elif isinstance(e, events.GpuInfo):
            status.gpu = e.available
        elif isinstance(e, events.Estimate):
            status.estimate_gib = e.peak_device_gib
    return status


def write(run: RunDir, status: Status) -> None:
    """Replace `status.json` atomically (a reader never sees half a file)."""
    replace_file(run.status_file, msgspec.json.encode(status))


def read(run: RunDir) -> Status:
    """The run's status now: the supervisor's file, the log's tail folded over it, and who lives."""
    try:
        status = msgspec.json.decode(bounds.read_bytes(run.status_file), type=Status)
    except (OSError, msgspec.DecodeError):
        status = Status()
        if file_size(run.events) <= TAIL_BYTES * 4:
            # A small log (or an imported run, which has no status file): fold it all.
            return _liveness(run, fold(status, _events(run.events, 0)))
    size = file_size(run.events)
    if 0 < status.offset <= size and size - status.offset <= TAIL_BYTES:
        fold(status, _events(run.events, status.offset, whole=True))
    else:  # a status file of an older loratui, or far behind: the tail, newer by time
        fold(status, _events(run.events, max(0, size - TAIL_BYTES)), since=status.t)
    return _liveness(run, status)


def _liveness(run: RunDir, status: Status) -> Status:
    if run.supervisor_pid() is not None:
        status.alive = "supervisor"
    elif run.trainer_pid() is not None:
        status.alive = "trainer"
    else:
        status.alive = ""
    # A suspended run needs nobody alive: its checkpoint waits for `loratui resume`.
    if status.end is None and not status.alive and status.state not in (*events.FINAL_STATES, events.SUSPENDED):
        status.state = LOST
    return status


def is_over(status: Status) -> bool:
    """Nothing more will happen to this run without a new command (ended, or lost)."""
    return status.end is not None or status.state == LOST



def _events(path: Path, start: int, whole: bool = False) -> list[events.AnyEvent]:
    """Whole lines from byte `start` (the first, likely partial, line skipped when start > 0 unless
    `whole` says `start` begins a line)."""
    try:
        with bounds.open_regular(path) as handle:
            handle.seek(start)
            data = handle.read()
    except OSError:
        return []
    if start and not whole:
        data = data[data.find(b"\n") + 1:]
    found = (events.decode_line(line) for line in data.split(b"\n") if line.strip())
    return [e for e in found if e is not None and not isinstance(e, events.Unknown)]
