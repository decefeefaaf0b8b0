"""The run's step axis across training phases of one process: a step count that starts again counts on.

A script may train twice (a warm-up Trainer, then the main one, each train() starting at step 1), and a plain loop
may print `step 1..N` again (a second phase, or an epoch counted from 1). The run's steps count on across them: a
later phase's steps are recorded after the earlier phases' last step (its step N is the run's `offset + N`), so its
loss curve follows the first one's in the log, the chart, replay and the advice rather than overlaying it. A single
phase's events are written as they are (no offset, not one byte changed). Used by the hook of a watched Trainer
(trainer/watch.py: one per process) and by the reading of a watched command's output (supervisor/watch_output.py).
"""

from __future__ import annotations

import msgspec

from loratui import events


class Phases:
    """The training phases seen so far."""

    def __init__(self) -> None:
        self.count = 0
        self.last_step = 0
        """The last step (the run's) recorded."""
        self.tokens_seen = 0
        """The tokens seen by then (`Step.tokens_seen` is the run's total)."""

    def offset(self, start: int) -> int:
        """The shift of a phase that starts at `start` (the step before its first): none for the first phase, nor
        for a later one that goes on past the steps recorded (its own resume); else what puts its first step after
        the last one."""
        return self.last_step - start if self.count and start < self.last_step else 0

    def begin(self, start: int) -> int:
        """A phase begins at `start`: its shift (`offset`)."""
        offset = self.offset(start)
        self.count += 1
        return offset

    def saw(self, event: events.AnyEvent) -> None:
        """Note an event recorded (on the run's step axis)."""
        if isinstance(event, events.Step):
            self.last_step = max(self.last_step, event.step)
            self.tokens_seen = max(self.tokens_seen, event.tokens_seen)


def shifted(event: events.AnyEvent, offset: int) -> events.AnyEvent:
    """The event on the run's step axis: its step (a TrainBegin's start and end too) moved on by `offset`."""
    if not offset:
        return event
    if isinstance(event, events.TrainBegin):
        return msgspec.structs.replace(event, start_step=event.start_step + offset,
                                       max_steps=event.max_steps + offset if event.max_steps > 0 else event.max_steps)
    step = getattr(event, "step", None)
    return msgspec.structs.replace(event, step=step + offset) if isinstance(step, int) else event


__all__ = ["Phases", "shifted"]
