"""Hang detection: no step for N times the run's median step interval, and an idle GPU.

Pure logic with the clock passed in: the supervisor feeds events with the monotonic time it read them at and
asks `check(now)` about once a second on the same clock, so a wall clock stepped forward (NTP, a VM resumed)
is no silence. The interval is measured between step events (it includes data loading, which `step_time` does
not), so a slow data loader is not taken for a hang. Evaluation and checkpoint saves take no steps: no verdict
while one is open.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from loratui import events

IDLE_UTIL = 5
"""GPU utilisation (percent) at or below which a card counts as idle."""
MIN_INTERVALS = 3


@dataclass(frozen=True)
class Hang:
    """What was seen: how long since the last step, the usual interval, and the GPU's utilisation."""

    step: int
    idle_s: float
    median_s: float
    limit_s: float
    util: int | None


class HangWatch:
    """Folds step, phase, state and sample events; `check(now)` says when the run looks hung (once per
    silence: a new step re-arms it)."""

    def __init__(self, factor: float = 10.0, min_s: float = 300.0) -> None:
        self.factor, self.min_s = factor, min_s
        self.intervals: deque[float] = deque(maxlen=101)
        self.last_step_t = 0.0
        self.last_step_at = 0.0
        """When the last step was seen, on `check`'s clock (its event time when fed without one)."""
        self.step = 0
        self.training = False
        self.phase = ""
        self.util: dict[int, int | None] = {}
        self.reported = False

    def feed(self, e: object, now: float | None = None) -> None:
        """Fold one event; `now` is when it was read, on the clock `check` is asked with."""
        if isinstance(e, events.Step) and e.rank == 0:
            if self.last_step_t and e.t > self.last_step_t:
                self.intervals.append(e.t - self.last_step_t)
            self.last_step_t, self.step, self.reported = e.t, e.step, False
            self.last_step_at = e.t if now is None else now
        elif isinstance(e, events.State):
            self.training = e.state == events.TRAINING
            if not self.training:
                self.last_step_t = 0.0  # a pause or a restart: the silence that follows is not a hang
        elif isinstance(e, events.Phase) and e.name in ("eval", "save"):
            self.phase = e.name if e.edge == "begin" else ""
        elif isinstance(e, events.Sample) and (e.run_pids or not self.util):
            self.util[e.gpu] = e.util
        elif isinstance(e, events.End):
            self.training = False

    def check(self, now: float) -> Hang | None:
        """A `Hang` the first time the silence passes the limit with the GPU idle, else None."""
        if (self.reported or not self.training or self.phase or not self.last_step_t
                or len(self.intervals) < MIN_INTERVALS):
            return None
        median = sorted(self.intervals)[len(self.intervals) // 2]
        limit = max(self.min_s, self.factor * median)
        idle = now - self.last_step_at
        if idle < limit:
            return None
        known = [u for u in self.util.values() if u is not None]
        if known and max(known) > IDLE_UTIL:
            return None  # the GPU is busy: a long step, not a hang
        self.reported = True
        return Hang(self.step, idle, median, limit, max(known) if known else None)


def describe(h: Hang) -> str:
    """The notice the supervisor records (and the advisor and alerts read)."""
    util = f"GPU {h.util}% busy" if h.util is not None else "no GPU utilisation reading"
    return (f"no step for {h.idle_s:.0f} s after step {h.step} ({h.idle_s / h.median_s:.0f}x the median step "
            f"interval of {h.median_s:.2f} s; limit {h.limit_s:.0f} s), {util}: the run looks hung")
