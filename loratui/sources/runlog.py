"""Event sources for the viewer: a live tail of a run's log (live and attach) and a fixed list (tests).

A source answers `poll()` with a `Batch`: new events, or (`reset=True`) the full list of events the view
must rebuild from, as a replay seek does. The app never goes looking for its own data.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from loratui import events, runstatus
from loratui.nodelogs import MergedTail, node_dirs
from loratui.rundir import RunDir

STORY_BACK = 2000
"""Events read before the moment an attach's away card starts from (the step and state the card's first moments
stand at)."""


@dataclass(frozen=True)
class Batch:
    """What a poll found."""

    events: list[events.AnyEvent] = field(default_factory=list)
    reset: bool = False
    note: str = ""
    ended: bool = False  # no more events will come (the writer is gone)


class EventSource(Protocol):
    """What the app reads from."""

    title: str

    def poll(self) -> Batch:
        """Events since the last poll."""


@dataclass(frozen=True)
class Opening:
    """An attach's history, from the run's saved index (`LiveSource.opening`): the state and advice at the index's
    end, and the events an away card reads (those from a little before the moment it starts from)."""

    state: Any
    advisor: Any
    recent: list[events.AnyEvent]
    n_events: int


class LiveSource:
    """Follows a run directory's growing log from its first line (attach shows the whole history), or from where
    its saved index ends (`opening`)."""

    def __init__(self, run: RunDir, follow_suspended: bool = False) -> None:
        """`follow_suspended`: a run suspended with no writer left is not over (the app: a resume or its requeued
        Slurm job's start goes on writing); the headless printer ends there, as the job's step must."""
        self.run = run
        self.follow_suspended = follow_suspended
        self.title = run.run_id
        self._tail = MergedTail(run.path)  # the run's log, and its other nodes' (nodelogs.py)
        self._ended = False
        self._suspended = False  # the last state the log told: a resume or a requeued job's start writes again
        self._disk_note = ""
        self._disk_at = 0.0

    def opening(self, recipe: Any, since: float | None) -> Opening | None:
        """The history folded from the run's saved index (`events.idx`, kept current by the supervisor's indexer),
        the tail then read from where it ends; call before the first `poll`. Folding a 200k-line log event by event
        took 14 s of the app's event loop; its saved index gives the same state and advice in 0.6 s
        (bench/adopt_long_log.py). None (read the log from its start) without a saved index that fits the log and
        the recipe, or for a run with other nodes' logs (merged by time from their starts). `since`: where an away
        card starts (None: no card)."""
        from loratui.sources.logindex import IndexedLog

        if self._tail.main.offset or node_dirs(self.run.path):
            return None
        try:
            log = IndexedLog.of_file(self.run.events, recipe)
            if not log.load_saved() or not log.n_events:
                return None
            n = log.n_events
            state, advisor = log.fold_at(n)
            start = n if since is None else max(0, log.index_at(since) - STORY_BACK)
            recent = log.read(start, n)
            header = log.read(0, 1)
        except (OSError, ValueError, RecursionError):
            return None
        index = log.index
        self._tail.main.offset = index.end_pos
        self._tail.main.skipped, self._tail.main.unknown = index.skipped, index.unknown
        self._tail.main.malformed = index.malformed
        if header and isinstance(header[0], events.Header):
            self._tail.main_offset = header[0].clock_offset
        self._ended = state.end is not None
        self._suspended = state.state == events.SUSPENDED
        return Opening(state, advisor, recent, n)

    def poll(self) -> Batch:
        found = self._tail.poll()
        said = [e.state for e in found if isinstance(e, events.State)]
        self._suspended = said[-1] == events.SUSPENDED if said else self._suspended
        if any(isinstance(e, events.End) for e in found):
            self._ended = True
        elif not found and not self._ended and not (self._suspended and self.follow_suspended) and \
                self._writer_gone():
            found = self._tail.finish()
            self._ended = True
            if not any(isinstance(e, events.End) for e in found):
                found += self._end_without_writer()
        return Batch(found, note=self._note(), ended=self._ended)

    def _disk_checked(self) -> bool:
        """Refresh the disk-full note at most once a second (a statvfs); True when it says something."""
        now = time.monotonic()
        if now - self._disk_at >= 1.0:
            self._disk_at, self._disk_note = now, disk_full_note(self.run.path)
        return bool(self._disk_note)

    def _end_without_writer(self) -> list[events.AnyEvent]:
        """The end a supervisor killed after its trainer's exit did not write, as the trainer's own `exit`
        event (or Slurm) tells it: what `ls` says of the run ([] when nothing does: the run is lost)."""
        end = runstatus.read(self.run).end
        return [end] if end is not None else []

    def _writer_gone(self) -> bool:
        """Nobody will write again: no supervisor and no (orphaned) trainer lives. Checked only when a poll
        found nothing, so a quiet log costs two pid checks a poll."""
        return self.run.supervisor_pid() is None and self.run.trainer_pid() is None

    def _note(self) -> str:
        parts = [self._disk_note] if self._disk_checked() else []
        if self._tail.skipped:
            parts.append(f"{self._tail.skipped} unreadable line(s) skipped")
        if self._tail.malformed:
            parts.append(f"{self._tail.malformed} malformed event(s) skipped (a known kind with missing or "
                         "wrong fields)")
        if self._tail.unknown:
            parts.append(f"{self._tail.unknown} event(s) of a newer schema ignored")
        return "; ".join(parts)


DISK_LOW = 1 << 20


def disk_full_note(path: Path) -> str:
    """'disk full: ...' when the run's filesystem has (almost) no room left: its log cannot grow."""
    try:
        free = shutil.disk_usage(path).free
    except OSError:
        return ""
    return ("disk full: the run's log and checkpoints cannot be written; free space on "
            f"{path.parent} (training goes on)") if free < DISK_LOW else ""


class ListSource:
    """A fixed list of events, delivered in chunks (tests and snapshots)."""

    def __init__(self, found: list[events.AnyEvent], title: str = "test", chunk: int = 1 << 30) -> None:
        self.title = title
        self._events = list(found)
        self._chunk = chunk
        self._pos = 0

    def poll(self) -> Batch:
        batch = self._events[self._pos:self._pos + self._chunk]
        self._pos += len(batch)
        return Batch(batch, ended=self._pos >= len(self._events))

    def extend(self, more: list[events.AnyEvent]) -> None:
        """Append events (a test playing a run forward)."""
        self._events.extend(more)
