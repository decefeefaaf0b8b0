"""Steps and losses from the printed output of a watched command that has no Trainer for the hook.

The one reader of training text (`loratui.logic.text_reader`, shared with `doctor` and `import`) turns the
lines into Step and Log events; this adapter adds what a live run needs around them: the TrainBegin and
`training` state that the first step opens (saying the run obeys pause by signal only), the time a step
took where no bar printed a rate or where the rate still carries a pause (`hold`/`release`), Steps for `step N loss X`
lines printed without a bar, and the run's step axis across a printed count that starts again (`_new_phase`).
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

from loratui import events
from loratui.logic.text_reader import TextReader
from loratui.logic.text_reader import values as v
from loratui.phases import Phases, shifted

_EVAL_WORDS = re.compile(r"\b(?:val|valid|validation|validating|eval|evaluation|evaluating|test|testing)\b",
                         re.IGNORECASE)
"""A loss line of an evaluation (`val step 1 loss 2.3`): its count starts again at every evaluation, and is no new
training phase (the reader logs its loss as the evaluation's `eval_loss`: `TextReader.evals_apart`)."""
SIGNAL_CONTROLS = ["pause", "resume", "stop"]
"""What a process without the hook obeys: SIGSTOP/SIGCONT of its process group, and SIGTERM."""


class OutputWatcher:
    """Printed lines in, TrainBegin/State/Step/Log events out (the supervisor writes Output itself)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        # tqdm draws on stderr, print() writes to stdout; an evaluation's loss line is no training loss
        self.reader = TextReader(bar_elsewhere=True, evals_apart=True)
        self.began = False
        self.step = 0
        self.epoch = 0.0  # the last epoch a printed record named (`'epoch': 0.5`): 0 where none did
        self._total = 0  # the max steps the last TrainBegin said
        self._last_t: float | None = None
        self._held_at: float | None = None  # when the command was held (SIGSTOP), while it is
        self._held_s = 0.0  # the time held since the last step read
        self._after_hold = False  # tqdm's smoothed rate still carries a hold (see `_step_time`)
        self._clean_rate = 0.0  # the bar's last rate before the hold
        self._back = 0  # readings in a row since the hold with the rate back to that
        self._lock = threading.Lock()  # hold and release come from the control thread, lines from the tails
        self.phases = Phases()  # a printed count that starts again counts on, as a second Trainer's does
        self.offset = 0  # the current phase's shift onto the run's step axis
        self._first = -1  # the first step a record printed (where its count starts): -1 before any
        self._last_log = -1  # the last record's step on the run's axis
        self._start = 0  # where the current phase starts on the run's axis (its TrainBegin's `start_step`)
        self._eval_steps: deque[int] = deque(maxlen=8)  # the steps evaluation loss lines printed, lately
        self._recent: deque[tuple[int, dict[str, float | str]]] = deque(maxlen=8)  # the last records, as printed

    def hold(self) -> None:
        """The command is held (SIGSTOP) from now: no step takes this time."""
        with self._lock:
            if self._held_at is None:
                self._held_at = float(self.clock())

    def release(self) -> None:
        """The command runs again (SIGCONT): the held time is left out of the step it interrupted."""
        with self._lock:
            if self._held_at is not None:
                self._held_s += max(0.0, float(self.clock()) - self._held_at)
                self._held_at, self._after_hold, self._back = None, True, 0

    def _take_held(self, now: float) -> float:
        """The time held since the last step read, up to `now` (a step printed before the hold may be read
        while it lasts: the rest of the hold is the next step's to leave out)."""
        with self._lock:
            held, self._held_s = self._held_s, 0.0
            if self._held_at is not None:
                held, self._held_at = held + max(0.0, now - self._held_at), now
            return held

    def feed(self, line: str) -> list[events.AnyEvent]:
        """The events one line (or one redraw of a progress bar) adds."""
        now = float(self.clock())
        if _EVAL_WORDS.search(line):
            found = v.loss_line(line)
            if found is not None and found[0] is not None:
                self._eval_steps.append(found[0])
        return self._events(self.reader.feed(line, now), now)

    def replay(self, outputs: Iterable[events.Output]) -> None:
        """Take up the reading where another watcher of this run left it (a supervisor killed with SIGKILL, whose
        keeper reads on): the output it recorded is fed again, each line at the time it was recorded, and the events
        it gives are dropped (they are in the log). The phase the printed steps are in, the run's step they are
        shifted by, the reader's held-back loss line and the bar's total are then the dead watcher's, so what is read
        next lands on the run's step axis (a fresh watcher recorded a second phase's printed step 9 as the run's step
        9 after step 15)."""
        clock = self.clock
        try:
            for output in outputs:
                self.clock = lambda t=output.t: t
                for line in output.lines:
                    self.feed(line)
        finally:
            self.clock = clock

    def close(self) -> list[events.AnyEvent]:
        """What the reader still held (the last loss) when the command ended."""
        now = float(self.clock())
        return self._events(self.reader.close(now), now)

    def _events(self, found: list[events.AnyEvent], now: float) -> list[events.AnyEvent]:
        out: list[events.AnyEvent] = []
        for event in found:
            if isinstance(event, events.Step):
                out += self._step(event.step, event.step_time, now)
            elif isinstance(event, events.Log) and v.is_eval(event.values):  # at the training's step, none of its own
                out += self._begin(now) + [shifted(event, self.offset)]
            elif isinstance(event, events.Log):
                out += self._new_phase(event.step, event.values, now)
                self._recent.append((event.step, event.values))
                event = shifted(event, self.offset)
                self._last_log = max(self._last_log, event.step)
                self._note_epoch(event.values.get("epoch"))
                if not self.reader.bar_total and event.step > self.step:
                    out += self._step(event.step, 0.0, now)  # no bar: the printed step is the step
                # A record read before the bar's first step (the stdout tail read ahead of stderr's) opens the
                # training all the same: it was dropped, and the run's first losses with it.
                out += self._begin(now) + self._total_learnt(now) + [event]
        for event in out:
            self.phases.saw(event)
        return out

    def _new_phase(self, step: int, values: dict[str, float | str], now: float) -> list[events.AnyEvent]:
        """A record whose printed step goes back below the last record's, to where the count began (`step 1..N`
        printed again: a second training phase, an epoch counted from 1) begins a phase: its steps count on after
        the steps recorded, as a second Trainer's do (`loratui.phases`), said in a notice. It is taken to start
        from 0, as a Trainer's train() does (a count printed from 0 from -1), so a loop printing every k steps
        keeps its k. Any other step below the last, one an evaluation's loss line printed (`_EVAL_WORDS`), and a
        copy of one of the last records (the same line logged on the other stream too, read after the first stream's
        next lines) are left as they are."""
        if self._first < 0:
            self._first = step
            self.phases.begin(0)
            return []
        if not (step + self.offset < self._last_log and step <= self._first) or step in self._eval_steps \
                or (step, values) in self._recent:
            return []
        start = min(0, step - 1)
        self.offset = self.phases.begin(start)
        self._start = self.offset + start
        self._total = self.reader.bar_total or self.reader.counted_total
        message = (f"the command's printed steps started again at step {step} (another training phase, or an epoch "
                   f"counted from 1): the run's steps count on after step {self.phases.last_step}, so its printed "
                   f"step N is recorded as the run's step {self.offset} + N")
        return [events.Notice(t=now, level="info", key="train_phase", message=message),
                self._train_begin(now, self._total)]

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
        held, measured = self._take_held(now), None
        if self._last_t is not None:  # the time between readings, less the time held
            measured = max(0.0, now - self._last_t - held) / (step - self.step)
        step_time = self._step_time(step_time, measured)
        self.step, self._last_t = step, now
        return self._begin(now) + [events.Step(t=now, step=step, epoch=self.epoch, step_time=step_time)]

    def _step_time(self, rate: float, measured: float | None) -> float:
        """The bar's rate, else the measured time. tqdm smooths its rate over the steps before, so after a hold it
        carries the held time for a dozen steps (3.26 s, 2.43 s, 1.85 s drawn for 0.5 s steps): the measured time
        stands for it until two readings in a row show the rate back within 10% of the one before the hold (the
        first reading after a resume may be a redraw made before the hold, at the old rate)."""
        if not rate:
            return measured or 0.0
        if self._after_hold and measured is not None:
            back = rate <= self._clean_rate * 1.1
            self._back = self._back + 1 if back else 0
            if self._back < 2:
                return measured
            self._after_hold = False
        if not self._after_hold:
            self._clean_rate = rate
        return rate

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

    def _train_begin(self, now: float, total: int) -> events.TrainBegin:
        """The current phase's TrainBegin: its start and max steps on the run's axis."""
        return events.TrainBegin(t=now, max_steps=self.offset + total if total else 0, num_epochs=0.0,
                                 controls=SIGNAL_CONTROLS, pause_mode="signal", start_step=self._start)


__all__ = ["SIGNAL_CONTROLS", "OutputWatcher"]
