"""Snapshots of a `RunState` (cheap, sharing the lists that only grow), events of note, a paused collector."""

from __future__ import annotations

import copy
import gc
import math
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields, is_dataclass
from typing import Any

from loratui import events
from loratui.logic.runstate import RunState


def is_of_note(event: Any) -> bool:
    """Whether `]`/`[` should stop at this event (failure, NaN, pause, eval, a saved checkpoint)."""
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
        # A save stops once, at its Checkpoint (which says where it went), not at its phase too.
        return event.edge == "begin" and event.name == "eval"
    if isinstance(event, events.Notice):
        return event.level in ("warning", "error")
    return isinstance(event, events.Checkpoint)


def note_label(event: Any) -> str:
    """What an event of note is, in a few words: `]`/`[` say where they stopped (a bare jump to step 120
    left the user guessing why there)."""
    if isinstance(event, events.End):
        return f"the run {event.state}" + (f" at step {event.step}" if event.step else "")
    if isinstance(event, events.Log):
        bad = [k for k in ("loss", "grad_norm", "eval_loss") if _non_finite(event.values.get(k))]
        return f"non-finite {', '.join(bad)} at step {event.step}"
    if isinstance(event, events.State):
        return event.state + (f": {event.reason}" if event.reason else "")
    if isinstance(event, events.Phase):
        return f"{event.name} at step {event.step}"
    if isinstance(event, events.Notice):
        return f"{event.level}: {event.message}"
    if isinstance(event, events.Checkpoint):
        return f"checkpoint saved at step {event.step}"
    return type(event).__name__.lower()


def _non_finite(value: events.Num) -> bool:
    number = events.num_in(value)
    return number is not None and not math.isfinite(number)


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


def freeze(state: RunState) -> dict[str, Any]:
    """A snapshot of `state`: top-level lists by (shared list, length), everything else copied."""
    # RunState's top-level lists only ever grow by append, so a prefix of the live list is exactly
    # what they held at snapshot time; sharing it keeps 256 snapshots of a 500k-point loss curve cheap
    # (and encoded together, the list is written once: indexcodec writes lists by reference).
    out: dict[str, Any] = {}
    for f in fields(state):
        value = getattr(state, f.name)
        out[f.name] = (value, len(value)) if type(value) is list else _clone(value)
    return out


def thaw(frozen: dict[str, Any], share: bool = False) -> RunState:
    """A new RunState from a snapshot. Its own copies, except with `share`: then it appends to the shared
    lists themselves (only for the snapshot at their end: the one fold that goes on from there)."""
    state = RunState()
    for name, value in frozen.items():
        if type(value) is tuple and len(value) == 2 and type(value[0]) is list:
            whole, length = value
            setattr(state, name, whole if share and len(whole) == length else whole[:length])
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
