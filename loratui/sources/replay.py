"""Replay of a recorded run: a virtual clock over an indexed log (a file or a list), with fast seeking.

No clock reads: the wall-clock time is always passed in, so the app drives it from a timer and tests from
a fake clock. Events are read through `logindex.IndexedLog`, a block at a time, so a 1 GB log is never
held whole; seeking folds the state *and the advice* from the nearest checkpoint (at most a few thousand
events), never from the first event, so a scrub on a 10-hour log costs milliseconds.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loratui.logic.advisor import Advisor
from loratui.logic.runstate import RunState
from loratui.sources.logindex import IndexedLog
from loratui.sources.snapshot import gc_paused, is_of_note  # noqa: F401  (re-exported)

SPEEDS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0)
"""The speed ladder that `+`/`-` walk (x1 … x1000)."""


@dataclass
class ReplayClock:
    """Maps wall-clock seconds to virtual (recorded) seconds at a speed, while playing."""

    virtual: float = 0.0
    """Virtual time at the anchor (or now, while paused)."""
    speed: float = 1.0
    anchor_wall: float | None = None
    """Wall time when play last (re)started; None while paused."""

    @property
    def playing(self) -> bool:
        return self.anchor_wall is not None

    def now(self, wall: float) -> float:
        """Virtual time at wall time `wall`."""
        if self.anchor_wall is None:
            return self.virtual
        return self.virtual + (wall - self.anchor_wall) * self.speed

    def play(self, wall: float) -> None:
        """Start (or keep) playing from the current virtual time."""
        if self.anchor_wall is None:
            self.anchor_wall = wall

    def pause(self, wall: float) -> None:
        """Freeze virtual time where it is."""
        self.virtual, self.anchor_wall = self.now(wall), None

    def toggle(self, wall: float) -> None:
        """Play when paused, pause when playing."""
        self.pause(wall) if self.playing else self.play(wall)

    def jump(self, virtual: float, wall: float) -> None:
        """Move virtual time to `virtual`, keeping play/pause as it was."""
        self.virtual = virtual
        if self.anchor_wall is not None:
            self.anchor_wall = wall

    def set_speed(self, speed: float, wall: float) -> None:
        """Change speed without a jump in virtual time."""
        self.virtual = self.now(wall)
        if self.anchor_wall is not None:
            self.anchor_wall = wall
        self.speed = min(max(speed, SPEEDS[0]), SPEEDS[-1])

    def faster(self, wall: float) -> None:
        """Next speed up the ladder."""
        self.set_speed(next((s for s in SPEEDS if s > self.speed), SPEEDS[-1]), wall)

    def slower(self, wall: float) -> None:
        """Next speed down the ladder."""
        self.set_speed(next((s for s in reversed(SPEEDS) if s < self.speed), SPEEDS[0]), wall)


class Replay:
    """A recorded log read against a `ReplayClock`, with a cursor, seeking and events of note."""

    def __init__(self, found: Sequence[Any] | IndexedLog, clock: ReplayClock | None = None,
                 snapshot_every: int | None = None, recipe: Any = None) -> None:
        self.log = found if isinstance(found, IndexedLog) else IndexedLog.of_list(found, recipe, snapshot_every)
        self.clock = clock or ReplayClock(virtual=self.start_t)
        self.cursor = 0
        """How many events have been delivered (the state shown is the fold of the first `cursor`)."""

    @property
    def n_events(self) -> int:
        """Events indexed so far (all of them once `log.complete`)."""
        return self.log.n_events

    @property
    def notes(self) -> Any:
        """Indices of the events of note, in order."""
        return self.log.index.notes

    @property
    def start_t(self) -> float:
        return self.log.start_t

    @property
    def end_t(self) -> float:
        return self.log.end_t

    @property
    def done(self) -> bool:
        return self.cursor >= self.n_events and self.log.complete

    def head(self) -> list[Any]:
        """The log's first event (its header), delivered before the index is loaded or built: moves the
        cursor past it, so the clock's first tick goes on from there. [] when it is already known."""
        first = getattr(self.log.source, "first_event", None)
        if self.cursor or first is None:
            return []
        found = first()
        if found is None:
            return []
        self.cursor = 1
        return [found]

    def read(self, start: int, end: int) -> list[Any]:
        """Events [start, end)."""
        return self.log.read(start, end)

    def index_at(self, t_virtual: float) -> int:
        """How many events have `t` at or before `t_virtual`."""
        return self.log.index_at(t_virtual)

    def events_until(self, t_virtual: float) -> list[Any]:
        """Events from the cursor up to `t_virtual`, advancing the cursor (never backwards)."""
        end = max(self.cursor, self.index_at(t_virtual))
        due, self.cursor = self.log.read(self.cursor, end), end
        return due

    def tick(self, wall: float) -> list[Any]:
        """Events due at wall time `wall`; pauses the clock at the end of the record."""
        if not self.clock.playing:
            return []  # paused (or just seeked): events sharing the cursor's timestamp stay undelivered
        due = self.events_until(self.clock.now(wall))
        if self.done and self.clock.playing:
            self.clock.pause(wall)
            self.clock.virtual = min(self.clock.virtual, self.end_t)
        return due

    def pause(self, wall: float) -> list[Any]:
        """Pause the clock at wall time `wall`, with the events due by then: the panes show the run at the
        time the bar shows (a pause between ticks froze the clock up to a tick ahead of them, 10 s of the run
        at x100)."""
        due = self.tick(wall)
        self.clock.pause(wall)
        return due

    def extend(self, more: Sequence[Any]) -> None:
        """Append events of an in-memory log still being written (a file's index follows by itself)."""
        self.log.add(more)

    def index_of_step(self, step: int) -> int:
        """The cursor that shows step `step` done: just before the next step's event."""
        index = self.log.index
        n = index.n_events
        pos = bisect.bisect_right(index.step_values, step)
        return min(index.step_index[pos], n) if pos < len(index.step_index) else n

    def start_of_training(self) -> int:
        """The cursor just before the first step (or past the record's first moment, for a log without
        steps): the run as it stood when training began, not an empty STARTING state."""
        index = self.log.index
        if len(index.step_values):
            return self.index_of_step(index.step_values[0] - 1)
        return self.index_at(self.start_t)

    def step_indexed(self, step: int) -> bool:
        """Whether the index already reaches step `step` (or holds every step there is)."""
        values = self.log.index.step_values
        return self.log.complete or (len(values) > 0 and values[-1] > step)

    def next_note(self, index: int | None = None) -> int | None:
        """The cursor just past the next event of note after `index` (default: the cursor)."""
        index = self.cursor if index is None else index
        pos = bisect.bisect_left(self.notes, index)
        return self.notes[pos] + 1 if pos < len(self.notes) else None

    def prev_note(self, index: int | None = None) -> int | None:
        """The cursor just past the previous event of note before `index` (default: the cursor)."""
        index = self.cursor if index is None else index
        pos = bisect.bisect_left(self.notes, index - 1)
        return self.notes[pos - 1] + 1 if pos > 0 else None

    def fold_at(self, index: int) -> tuple[RunState, Advisor]:
        """(state, advice) after the first `index` events, from the nearest checkpoint. Touches neither
        the cursor nor the clock: a worker thread may call it while the app plays on."""
        return self.log.fold_at(index)

    def move_to(self, index: int, wall: float) -> int:
        """Put the cursor at `index` (clamped) and the clock at its last event; returns the cursor."""
        self.cursor = min(max(index, 0), self.n_events)
        self.clock.jump(self.log.time_of(self.cursor) if self.cursor else self.start_t, wall)
        return self.cursor

    def seek(self, index: int, wall: float) -> RunState:
        """Move the cursor to `index` and return the state there (one thread: headless, tests)."""
        return self.fold_at(self.move_to(index, wall))[0]

    def state_at(self, index: int) -> RunState:
        """A fresh `RunState` folded over the first `index` events."""
        return self.fold_at(index)[0]
