"""Where a run stands, without reading its whole log: one answer for `ls`, attach, restart and headless.

The supervisor keeps `status.json` current (a fold of the log it tails); a reader takes that file, folds
the log's last few hundred KiB over it (events newer than the file), and asks whether the supervisor or
the trainer still lives. A run with no end event and no live process ends as its trainer's last `exit` event
said (its supervisor was killed after the trainer exited), or is `lost` without one. A trainer whose
supervisor died trains on, obeys `control.cmds`, and writes its own end (see trainer/orphan.py), so every
view tells the truth within a poll.
"""

from __future__ import annotations

from collections.abc import Iterable
import os
import subprocess
import sys
import time
from pathlib import Path

import msgspec

from loratui import bounds, events, slurm
from loratui.eventlog import EventWriter
from loratui.errors import UsageError
from loratui.rundir import (
    STOPPED_CODES,
    RunDir,
    file_size,
    list_runs,
    node_name,
    pid_host,
    replace_file,
    resolve,
    where,
)

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
    job_id: str = ""
    """The Slurm job the run started in ('' outside Slurm)."""
    node: str = ""
    """The host that owns the run (its supervisor's)."""
    exited: events.Exit | None = None
    """The trainer's (or keeper's) own word on its exit, since the last (re)start: the outcome when the
    supervisor died before writing the End."""
    stop_asked: bool = False
    """A stop was accepted since the last (re)start (a watched command stopped by signal exits -15)."""


def fold(status: Status, found: Iterable[events.AnyEvent], since: float = 0.0) -> Status:
    """`status` advanced by `found` (in log order), skipping events older than `since` (already folded)."""
    for e in found:
        if e.t < since:
            continue
        status.t = max(status.t, e.t)
        if isinstance(e, events.State) and status.end is None:
            status.state = e.state
            status.step = e.step if e.step is not None else status.step
            if e.state == events.STARTING:  # a new life (a guard restart, a resume): its exit is to come
                status.exited, status.stop_asked = None, False
        elif isinstance(e, events.Exit):
            status.exited = e
        elif isinstance(e, events.Control) and e.command == "stop":
            status.stop_asked = True
        elif isinstance(e, events.End):
            status.end, status.state = e, e.state
            status.step = max(status.step, e.step)
        elif isinstance(e, events.Step):
            status.step = max(status.step, e.step)
        elif isinstance(e, events.Log):
            if e.values.get("loss") is not None:  # a NaN step logged as 0.0 is a NaN (issue 24 item 6)
                status.loss = events.num_out(events.logged_loss(e.values))
        elif isinstance(e, events.TrainBegin):
            status.max_steps = e.max_steps
        elif isinstance(e, events.Sample):
            status.peak_used = max(status.peak_used, e.used_max)
        elif isinstance(e, events.GpuInfo):
            status.gpu = e.available
        elif isinstance(e, events.Estimate):
            status.estimate_gib = e.peak_device_gib
        elif isinstance(e, events.Header):
            status.job_id, status.node = e.job_id, e.node
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


def _scheduler_end(run: RunDir, status: Status, but_failed: bool = False) -> Status:
    """A Slurm run that nobody runs and that has no end: record Slurm's verdict as its end (whoever looks
    first; a marker file makes it once per job start), and send the end's alert the dead supervisor could
    not. Every process of a job killed at its limit or with its node may die without writing a line.
    `but_failed`: not Slurm's FAILED (its batch script's exit, after the supervisor's death, tells less than
    the trainer's own exit)."""
    job = slurm.job(status.job_id)
    if job is None or job.state not in slurm.SCHEDULER_ENDS or but_failed and job.state == "FAILED":
        return status
    marker = run.path / f"scheduler-end.{job.job_id}.{job.restarts}"
    try:
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    except OSError:
        return status  # another viewer records it (or did)
    end = events.End(t=time.time(), state=slurm.SCHEDULER_ENDS[job.state][0], cause=job.state,
                     error=job.cause(), step=status.step)
    EventWriter(run.events).write(end)
    fold(status, [end])
    send_last_alert(run)
    return status


def send_last_alert(run: RunDir) -> None:
    """Have the end's alert sent that a dead supervisor would have sent: by a process started by module name
    (the owner side sends alerts and holds their secret; the trainer, the keeper and viewers never read it)."""
    try:
        subprocess.Popen([sys.executable, "-m", "loratui.supervisor.last_alert", str(run.path)],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, close_fds=True)
    except OSError:
        pass  # no process to spare: the log still holds the end


def _liveness(run: RunDir, status: Status) -> Status:
    host = pid_host(run.pidfile)
    if host and host != node_name():  # its pid means nothing here: ask Slurm, or the status file's age
        status.alive = "supervisor" if _alive_elsewhere(run, status) else ""
    elif run.supervisor_pid() is not None:
        status.alive = "supervisor"
    elif run.trainer_pid() is not None:
        status.alive = "trainer"
    else:
        status.alive = ""
    # A suspended run needs nobody alive: its checkpoint waits for `loratui resume`.
    if status.end is None and not status.alive and status.state not in (*events.FINAL_STATES, events.SUSPENDED):
        exited = status.exited if status.exited is not None and status.exited.state in events.FINAL_STATES else None
        status.state = LOST
        if status.job_id:  # Slurm's word first (a time limit's SIGTERM made the trainer's own exit a "stop")
            _scheduler_end(run, status, but_failed=exited is not None)
        if status.end is None and exited is not None:
            # The supervisor died between its trainer's exit and the End: the trainer said how it ended.
            status.end = _exit_end(exited, status.stop_asked)
            status.state, status.step = status.end.state, max(status.step, status.end.step)
    return status


def _exit_end(exited: events.Exit, stop_asked: bool) -> events.End:
    """The End the supervisor would have written after this exit (it knows of a stop the command did not)."""
    end = exited.as_end()
    if stop_asked and exited.exit_code in STOPPED_CODES:
        return msgspec.structs.replace(end, state=events.STOPPED, error="")
    return end


HEARTBEAT_S = 30.0
"""A supervisor on another host that has not touched status.json for this long is taken for gone."""


def _alive_elsewhere(run: RunDir, status: Status) -> bool:
    """A supervisor on another host lives while its Slurm job runs (outside Slurm: while its status file is
    fresh; the supervisor touches it every few seconds)."""
    job = slurm.job(status.job_id) if status.job_id else None
    if job is not None:
        return job.state in ("RUNNING", "COMPLETING", "SIGNALING")
    try:
        return time.time() - run.status_file.stat().st_mtime < HEARTBEAT_S
    except OSError:
        return False


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


def is_live(status: Status) -> bool:
    """Running, or suspended and waiting for `resume` (with or without its supervisor)."""
    return bool(status.alive) or (status.state == events.SUSPENDED and status.end is None)


def pick_run(name: str | None, runs_dir: Path, need_running: bool, everywhere: bool = False) -> RunDir:
    """The run a command acts on: the named one, else the one that is running (never a guess).

    With no name: the single running run; several running is refused with their ids; none running is
    refused for commands that act on a live run, and means the newest run for viewers (attach, replay).
    """
    if name:
        return resolve(name, runs_dir, everywhere)
    running = [run for run in list_runs(runs_dir, everywhere) if is_live(read(run))]
    if len(running) == 1:
        return running[0]
    if running:
        raise UsageError(f"{len(running)} runs are running ({', '.join(r.run_id for r in running)}); "
                         "name one")
    if need_running:
        raise UsageError(f"no run is running in {where(runs_dir, everywhere)}; `loratui ls` lists the runs")
    return resolve(None, runs_dir, everywhere)
