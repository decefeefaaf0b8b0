"""Steps and losses from the printed output of a watched command that has no Trainer for the hook.

The one reader of training text (`loratui.logic.text_reader`, shared with `doctor` and `import`) turns the
lines into Step and Log events; this adapter adds what a live run needs around them: the TrainBegin and
`training` state that the first step opens (saying the run obeys pause by signal only), the time a step
took where no bar printed a rate, and Steps for `step N loss X` lines printed without a bar.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from loratui import events
from loratui.logic.text_reader import TextReader

SIGNAL_CONTROLS = ["pause", "resume", "stop"]
"""What a process without the hook obeys: SIGSTOP/SIGCONT of its process group, and SIGTERM."""


class OutputWatcher:
    """Printed lines in, TrainBegin/State/Step/Log events out (the supervisor writes Output itself)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.reader = TextReader()
        self.began = False
        self.step = 0
        self.epoch = 0.0  # the last epoch a printed record named (`'epoch': 0.5`): 0 where none did
        self._total = 0  # the max steps the last TrainBegin said
        self._last_t: float | None = None

    def feed(self, line: str) -> list[events.AnyEvent]:
        """The events one line (or one redraw of a progress bar) adds."""
        now = float(self.clock())
        return self._events(self.reader.feed(line, now), now)

    def close(self) -> list[events.AnyEvent]:
        """What the reader still held (the last loss) when the command ended."""
        now = float(self.clock())
        return self._events(self.reader.close(now), now)

    def _events(self, found: list[events.AnyEvent], now: float) -> list[events.AnyEvent]:
        out: list[events.AnyEvent] = []
        for event in found:
            if isinstance(event, events.Step):
                out += self._step(event.step, event.step_time, now)
            elif isinstance(event, events.Log):
                self._note_epoch(event.values.get("epoch"))
                if not self.reader.bar_total and event.step > self.step:
                    out += self._step(event.step, 0.0, now)  # no bar: the printed step is the step
                if self.began:
                    out += self._total_learnt(now) + [event]
        return out

    def _total_learnt(self, now: float) -> list[events.AnyEvent]:
        """A TrainBegin again once the max steps are known, if they were not at the first step (a counter beside
        the epoch is known to count the epoch's batches or the run's steps only when the next epoch starts)."""
        total = self.reader.bar_total or self.reader.counted_total
        if not total or total == self._total:
            return []
        self._total = total
        return [self._train_begin(now, total)]

    def _step(self, step: int, step_time: float, now: float) -> list[events.AnyEvent]:
        if step <= self.step:
            return []
        if not step_time and self._last_t is not None:  # no rate printed: the time between readings
            step_time = (now - self._last_t) / (step - self.step)
        self.step, self._last_t = step, now
        return self._begin(now) + [events.Step(t=now, step=step, epoch=self.epoch, step_time=step_time)]

    def _note_epoch(self, epoch: float | None) -> None:
        """Keep a record's epoch for the Steps that follow (the status bar said `ep --` for a loop printing
        `{'loss': ..., 'epoch': 0.5}`); a bar's Step comes before the record, so it carries the previous one."""
        if epoch is not None and math.isfinite(epoch) and 0 <= epoch < 1e6:
            self.epoch = float(epoch)

    def _begin(self, now: float) -> list[events.AnyEvent]:
        if self.began:
            return []
        self.began = True
        self._total = self.reader.bar_total or self.reader.counted_total  # a tqdm bar's, else `step 25/30`'s
        return [self._train_begin(now, self._total),
                events.State(t=now, state=events.TRAINING, reason="steps read from the command's output")]

    @staticmethod
    def _train_begin(now: float, total: int) -> events.TrainBegin:
        return events.TrainBegin(t=now, max_steps=total, num_epochs=0.0, controls=SIGNAL_CONTROLS, pause_mode="signal")


__all__ = ["SIGNAL_CONTROLS", "OutputWatcher"]
