"""Replay of a recorded run: a virtual clock over a finished (or growing) event list, with fast seeking.

Pure logic: the wall-clock time is always passed in (no clock reads, no threads, no I/O), so the app can
drive it from a timer and tests from a fake clock. Seeking builds a `RunState` from the nearest periodic
snapshot instead of folding from the start, so a scrub on a 10-hour log costs milliseconds.
"""

from __future__ import annotations

import bisect
import copy
import gc
import math
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

from loratui import events
from loratui.logic.runstate import RunState

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


def is_of_note(event: Any) -> bool:
    """Whether `]`/`[` should stop at this event (failure, NaN, pause, eval, save, checkpoint)."""
    kind = type(event)
    if kind is events.Sample or kind is events.Step:  # nine events in ten: answer them first
        return False
    if isinstance(event, events.End):
        return event.state != events.FINISHED
    if isinstance(event, events.Log):
        return any(_non_finite(event.values.get(k)) for k in ("loss", "grad_norm", "eval_loss"))
    if isinstance(event, events.State):
        return event.state in (events.PAUSED, events.SUSPENDED)
    if isinstance(event, events.Phase):
        return event.edge == "begin" and event.name in ("eval", "save")
    if isinstance(event, events.Notice):
        return event.level in ("warning", "error")
    return isinstance(event, events.Checkpoint)


def _non_finite(value: events.Num) -> bool:
    number = events.num_in(value)
    return number is not None and not math.isfinite(number)


class Replay:
    """A recorded event list read against a `ReplayClock`, with a cursor, seeking and events of note."""

    def __init__(self, found: Sequence[Any], clock: ReplayClock | None = None,
                 snapshot_every: int | None = None) -> None:
        self.events = list(found)
        with gc_paused():
            self.times = _monotonic_times(self.events)
            self.notes = [i for i, e in enumerate(self.events) if is_of_note(e)]
            self._step_values, self._step_index = _step_index(self.events)
        self.clock = clock or ReplayClock(virtual=self.start_t)
        self.cursor = 0
        """How many events have been delivered (the state shown is events[:cursor])."""
        self._snapshots = Snapshots(self.events, snapshot_every)

    @property
    def start_t(self) -> float:
        return self.times[0] if self.times else 0.0

    @property
    def end_t(self) -> float:
        return self.times[-1] if self.times else 0.0

    @property
    def done(self) -> bool:
        return self.cursor >= len(self.events)

    def index_at(self, t_virtual: float) -> int:
        """How many events have `t` at or before `t_virtual`."""
        return bisect.bisect_right(self.times, t_virtual)

    def events_until(self, t_virtual: float) -> list[Any]:
        """Events from the cursor up to `t_virtual`, advancing the cursor (never backwards)."""
        end = max(self.cursor, self.index_at(t_virtual))
        due, self.cursor = self.events[self.cursor:end], end
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

    def extend(self, more: Sequence[Any]) -> None:
        """Append events of a log still being written."""
        for event in more:
            self.times.append(max(event.t, self.times[-1]) if self.times else event.t)
            self.events.append(event)
            if is_of_note(event):
                self.notes.append(len(self.events) - 1)
            _add_step(self._step_values, self._step_index, event, len(self.events) - 1)
        self._snapshots.extend(self.events)

    def index_of_step(self, step: int) -> int:
        """The cursor that shows step `step` done: just before the next step's event."""
        pos = bisect.bisect_right(self._step_values, step)
        return self._step_index[pos] if pos < len(self._step_index) else len(self.events)

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

    def seek(self, index: int, wall: float) -> RunState:
        """Move the cursor to `index` (clamped) and return the state there; the clock follows."""
        self.cursor = min(max(index, 0), len(self.events))
        self.clock.jump(self.times[self.cursor - 1] if self.cursor else self.start_t, wall)
        return self.state_at(self.cursor)

    def state_at(self, index: int) -> RunState:
        """A fresh `RunState` folded over events[:index]."""
        return self._snapshots.state_at(index)


class Snapshots:
    """Periodic `RunState` snapshots of an event list, taken lazily as far as anyone has asked."""

    def __init__(self, found: list[Any], every: int | None = None) -> None:
        # ~128 snapshots whatever the length: a seek folds at most len/128 events past one.
        self.every = every or max(2048, len(found) // 128)
        self._found = found
        self._live = RunState()
        self._marks: list[int] = [0]
        self._frozen: list[dict[str, Any]] = [_freeze(self._live)]

    def extend(self, found: list[Any]) -> None:
        """Take note that `found` (the same list, grown) has more events."""
        self._found = found

    def state_at(self, index: int) -> RunState:
        """A new state equal to a fold of found[:index]."""
        index = min(max(index, 0), len(self._found))
        with gc_paused():
            self._advance(index)
            pos = bisect.bisect_right(self._marks, index) - 1
            state = _thaw(self._frozen[pos])
            return state.feed_all(self._found[self._marks[pos]:index])

    def _advance(self, index: int) -> None:
        """Fold the live state forward to the last snapshot mark at or below `index`."""
        folded = self._live.n_events
        while folded + self.every <= index:
            folded += self.every
            self._live.feed_all(self._found[folded - self.every:folded])
            self._marks.append(folded)
            self._frozen.append(_freeze(self._live))


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many acyclic objects."""
    # With ~460k events alive, every collection walks them all: a fold of a 10-hour log took twice as
    # long with the collector running (bench/replay_open.py). Events and RunState build no cycles.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _freeze(state: RunState) -> dict[str, Any]:
    """A snapshot of `state`: top-level lists by (shared list, length), everything else copied."""
    # RunState's top-level lists only ever grow by append, so a prefix of the live list is exactly
    # what they held at snapshot time; sharing it keeps 128 snapshots of a 50k-point loss curve cheap.
    out: dict[str, Any] = {}
    for f in fields(state):
        value = getattr(state, f.name)
        out[f.name] = (value, len(value)) if type(value) is list else _clone(value)
    return out


def _thaw(frozen: dict[str, Any]) -> RunState:
    """A new RunState from a snapshot (its own copies: feeding it never touches the snapshot)."""
    state = RunState()
    for name, value in frozen.items():
        if type(value) is tuple and len(value) == 2 and type(value[0]) is list:
            setattr(state, name, value[0][:value[1]])
        else:
            setattr(state, name, _clone(value))
    return state


def _clone(value: Any) -> Any:
    """A copy deep enough that folding more events into it leaves the original as it was."""
    if type(value) is list:
        return list(value)
    if type(value) is deque:
        return deque(value, maxlen=value.maxlen)
    if type(value) is dict:
        return {k: _clone(v) for k, v in value.items()}
    if is_dataclass(value) and not isinstance(value, type):
        clone = copy.copy(value)
        for f in fields(value):
            setattr(clone, f.name, _clone(getattr(value, f.name)))
        return clone
    return value  # scalars, strings and frozen msgspec events are immutable


def _monotonic_times(found: Sequence[Any]) -> list[float]:
    """Event times made non-decreasing: several writers stamp events, so `t` may step back a little."""
    times: list[float] = []
    latest = -math.inf
    for event in found:
        latest = max(latest, event.t)
        times.append(latest)
    return times


def _step_index(found: Sequence[Any]) -> tuple[list[int], list[int]]:
    """(step numbers, event indices) of each step's first event, steps strictly increasing."""
    values: list[int] = []
    indices: list[int] = []
    for index, event in enumerate(found):
        _add_step(values, indices, event, index)
    return values, indices


def _add_step(values: list[int], indices: list[int], event: Any, index: int) -> None:
    # Step events mark steps; an imported log without them still has Log events carrying the step.
    if isinstance(event, (events.Step, events.Log)) and (not values or event.step > values[-1]):
        values.append(event.step)
        indices.append(index)
