"""Steps and losses from the printed output of a watched command that has no Trainer for the hook.

The one reader of training text (`loratui.logic.text_reader`, shared with `doctor` and `import`) turns the
lines into Step and Log events; this adapter adds what a live run needs around them: the TrainBegin and
`training` state that the first step opens (saying the run obeys pause by signal only), the time a step
took where no bar printed a rate or where the rate still carries a pause (`hold`/`release`; the time between the
writes of the lines that printed the steps, not between their reads: `feed_lines`), Steps for `step N loss X`
lines printed without a bar, and the run's step axis across a printed count that starts again (`_new_phase`).
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

import msgspec

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
        self._began_t = 0.0  # when the training's TrainBegin was recorded: no step is placed before it
        self.step = 0
        self.epoch = 0.0  # the last epoch a printed record named (`'epoch': 0.5`): 0 where none did
        self._total = 0  # the max steps the last TrainBegin said
        self._last_t: float | None = None  # when the last step recorded was written (its line), as well as known
        self._last_share: float | None = None  # the step time the last steps shared (those of one read)
        self._held_at: float | None = None  # when the command was held (SIGSTOP), while it is
        self._holds: list[tuple[float, float]] = []  # (from, to) of holds since the last step recorded
        self._pending: list[tuple[events.Step, int]] = []  # the Steps of the lines being read, and the step before each
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
                self._holds.append((self._held_at, max(self._held_at, float(self.clock()))))
                self._held_at, self._after_hold, self._back = None, True, 0

    def _held_within(self, start: float, end: float) -> float:
        """The time held between `start` and `end` (a step printed before the hold may be read while it lasts, or
        after it: only the part of a hold between the two writes is left out of the steps between them)."""
        with self._lock:
            spans = self._holds + ([(self._held_at, max(self._held_at, end))] if self._held_at is not None else [])
            self._holds = [span for span in self._holds if span[1] > end]
            return sum(max(0.0, min(to, end) - max(since, start)) for since, to in spans)

    def feed(self, line: str) -> list[events.AnyEvent]:
        """The events one line (or one redraw of a progress bar) adds, read now."""
        return self.feed_lines([line])

    def feed_lines(self, lines: list[str], written: float | None = None) -> list[events.AnyEvent]:
        """The events lines read together add; `written`: when the last of them was written (the file's mtime).

        A line's step took the time since the step before was written, less any hold between. When several step
        lines come in one read (a slow reader, a loaded machine, block-buffered output flushed at once), when each
        was written is not knowable: read one by one, the first took the whole gap and the rest nothing (3.04 s
        then 0.002, 0, 0 s for steps printed every 0.5 s). They share the time between the last step's write and
        this read's evenly, as steps logged together do (importers' `step_time`), and their times `t` are placed
        that far apart; the sum is true, the split between them is the even one."""
        now = float(self.clock())
        at = now if written is None or not (self._last_t or 0.0) <= written <= now + 1.0 else written
        out: list[events.AnyEvent] = []
        for line in lines:
            if _EVAL_WORDS.search(line):
                found = v.loss_line(line)
                if found is not None and found[0] is not None:
                    self._eval_steps.append(found[0])
            out += self._events(self.reader.feed(line, now), now)
        return self._timed(out, at)

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
        """What the reader still held (the last loss) when the command ended. Its line was written before the last
        read, so the time since then is none of its own: it takes the share of the steps read before it (none
        where there was no such share: unknown, not the poll's gap)."""
        now = float(self.clock())
        return self._timed(self._events(self.reader.close(now), now), None)

    def _timed(self, out: list[events.AnyEvent], at: float | None) -> list[events.AnyEvent]:
        """The Steps of one read given their times: the time from the last step's write to `at` (the read's last
        write), less the holds between, shared by the steps they advance; `at` None (at the end): the last share."""
        pending, self._pending = self._pending, []
        if not pending:
            return out
        before, last = pending[0][1], pending[-1][0].step
        share = self._last_share if at is None else None
        if at is not None and self._last_t is not None:
            share = max(0.0, at - self._last_t - self._held_within(self._last_t, at)) / (last - before)
        now = float(self.clock())
        end = at if at is not None else now
        if at is None and self._last_t is not None and share is not None:
            end = min(now, self._last_t + share * (last - before))
        timed: dict[int, events.Step] = {}
        for event, previous in pending:
            measured = share  # a step's time, each of the steps this event advances (Step.step_time is per step)
            when = end - share * (last - event.step) if share is not None else end
            timed[id(event)] = msgspec.structs.replace(
                event, t=max(when, self._began_t), step_time=self._step_time(event.step_time, measured))
        self._last_t, self._last_share = end, share if share is not None else self._last_share
        return [timed.get(id(event), event) for event in out]

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

    def _step(self, step: int, rate: float, now: float) -> list[events.AnyEvent]:
        """A Step whose time `_timed` gives once the read's lines are all in (`rate`: the bar's, 0 without one)."""
        if step <= self.step:
            return []
        event = events.Step(t=now, step=step, epoch=self.epoch, step_time=rate)
        self._pending.append((event, self.step))
        self.step = step
        return self._begin(now) + [event]

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
        self.began, self._began_t = True, now
        self._total = self.reader.bar_total or self.reader.counted_total  # a tqdm bar's, else `step 25/30`'s
        return [self._train_begin(now, self._total),
                events.State(t=now, state=events.TRAINING, reason="steps read from the command's output")]

    def _train_begin(self, now: float, total: int) -> events.TrainBegin:
        """The current phase's TrainBegin: its start and max steps on the run's axis."""
        return events.TrainBegin(t=now, max_steps=self.offset + total if total else 0, num_epochs=0.0,
                                 controls=SIGNAL_CONTROLS, pause_mode="signal", start_step=self._start)


__all__ = ["SIGNAL_CONTROLS", "OutputWatcher"]
