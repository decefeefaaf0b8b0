"""Collecting every trainer rank's thread stacks: SIGUSR1 to each rank (set up by trainer/stackdump.py),
then what each wrote to its `stacks.rank<N>.txt`, as one `stacks` event in the log."""

from __future__ import annotations

import os
import signal
import time

import psutil

from loratui import events
from loratui.eventlog import EventWriter
from loratui.rundir import RunDir, file_size, stacks_file

MAX_CHARS = 64_000
"""Per rank, so one event stays a reasonable line."""


def rank_processes(run: RunDir) -> dict[str, psutil.Process]:
    """rank -> the trainer process of that rank (not torchrun's agent, not DataLoader workers)."""
    found: dict[str, psutil.Process] = {}
    where = str(run.path)
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if "loratui.trainer" not in cmdline or "torch.distributed.run" in cmdline:
            continue
        if not any(os.path.abspath(arg) == os.path.abspath(where) for arg in cmdline):
            continue
        try:
            parent = proc.parent()
            if parent is not None and "loratui.trainer" in (parent.cmdline() or []) and \
                    "torch.distributed.run" not in parent.cmdline():
                continue  # a forked DataLoader worker: it shares its rank's dump file
            rank = proc.environ().get("RANK", "0")
        except psutil.Error:
            continue
        found[rank] = proc
    return found


def collect(run: RunDir, reason: str = "", wait_s: float = 5.0) -> events.Stacks | None:
    """Signal every rank, gather the dumps, record them in the log; None when no rank runs."""
    procs = rank_processes(run)
    if not procs:
        return None
    sizes = {rank: file_size(stacks_file(run.path, rank)) for rank in procs}
    for proc in procs.values():
        try:
            proc.send_signal(signal.SIGUSR1)
        except psutil.Error:
            pass
    dumps = _read_new(run, sizes, wait_s)
    event = events.Stacks(t=time.time(), ranks=dumps, reason=reason)
    writer = EventWriter(run.events)
    try:
        writer.write(event)
    finally:
        writer.close()
    return event


def _read_new(run: RunDir, sizes: dict[str, int], wait_s: float) -> dict[str, str]:
    """What each rank appended since `sizes`, once every file has grown and then held still briefly."""
    deadline = time.monotonic() + wait_s
    last: dict[str, int] = {}
    while time.monotonic() < deadline:
        now = {rank: file_size(stacks_file(run.path, rank)) for rank in sizes}
        if all(now[r] > sizes[r] for r in sizes) and now == last:
            break
        last = now
        time.sleep(0.1)
    dumps = {}
    for rank, start in sorted(sizes.items()):
        try:
            with open(stacks_file(run.path, rank), "rb") as handle:
                handle.seek(start)
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            text = ""
        dumps[rank] = text[-MAX_CHARS:] or "(no dump: the rank did not answer SIGUSR1 in time)"
    return dumps



def render(event: events.Stacks) -> str:
    """The dump as text for the terminal (inert: file and function names are the program's)."""
    from loratui.text import inert

    parts = []
    for rank, text in sorted(event.ranks.items(), key=lambda item: int(item[0]) if item[0].isdigit() else 0):
        parts.append(f"=== rank {inert(rank, False)} ===\n{inert(text.rstrip())}")
    return "\n\n".join(parts)
