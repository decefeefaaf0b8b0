"""Steps and losses from the printed output of a watched command that has no Trainer for the hook.

TODO(reader): `loratui/logic/trainer_text.py` (branch `reader`) is to be the one reader of training text
(printed Trainer dicts, tqdm, LLaMA-Factory and axolotl logs, Lightning). When it lands, this module
becomes a thin adapter over it, keeping `feed(line) -> list[events.AnyEvent]`. Until then it reads only
the two commonest shapes: a tqdm bar (`12/100 [00:03<00:20,  4.1it/s, loss=2.31]`) and a loss value
(`loss=2.31`, `loss: 2.31`, `'loss': 2.31`).
"""

from __future__ import annotations

import re
import time

from loratui import events

_BAR = re.compile(r"^(.*?)\|.*\|\s*(\d+)/(\d+)\s*\[([^\]]*)\]")
_NOT_TRAINING = re.compile(r"load|map|download|fetch|writ|sav|tokeni[sz]|filter|generat|resolv|shard|eval|"
                           r"valid|test|predict|infer", re.IGNORECASE)
"""Bars of loading, preprocessing and evaluation, by their description: not training steps."""
_RATE = re.compile(r"([\d.]+)\s*(it/s|s/it)")
_LOSS = re.compile(r"""['"]?\bloss['"]?\s*[=:]\s*(-?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|nan|-?inf)""",
                   re.IGNORECASE)
_STEP = re.compile(r"\bstep\s*[=:]?\s*(\d+)(?:\s*/\s*(\d+))?", re.IGNORECASE)

SIGNAL_CONTROLS = ["pause", "resume", "stop"]
"""What a process without the hook obeys: SIGSTOP/SIGCONT of its process group, and SIGTERM."""


class OutputWatcher:
    """Turns printed lines into TrainBegin/Step/Log events (the first step seen opens training)."""

    def __init__(self, clock: object = time.time) -> None:
        self.clock = clock
        self.step = 0
        self.total = 0
        self.began = False
        self._offset = 0  # steps of earlier bars of the same length (one bar per epoch)
        self._bar_n = 0
        self._logged_step = -1
        self._last_t: float | None = None

    def feed(self, line: str) -> list[events.AnyEvent]:
        """The events one line (or one redraw of a progress bar) adds."""
        out: list[events.AnyEvent] = []
        bar = _BAR.search(line)
        if bar and (_NOT_TRAINING.search(bar.group(1)) or not _RATE.search(bar.group(4))):
            return []  # a loading, preprocessing or eval bar (or one counting examples, not steps)
        step = None
        step_time = 0.0
        if bar:
            step, step_time = self._bar(int(bar.group(2)), int(bar.group(3)), bar.group(4))
        else:
            found = _STEP.search(line)
            if found:
                step = int(found.group(1))
                if found.group(2):
                    self.total = max(self.total, int(found.group(2)))
        if step is not None and step > self.step:
            now = self._now()
            if not step_time and self._last_t is not None:  # no rate printed: the time between readings
                step_time = (now - self._last_t) / (step - self.step)
            out += self._begin() + [events.Step(t=now, step=step, epoch=0.0, step_time=step_time)]
            self.step, self._last_t = step, now
        loss = _LOSS.search(bar.group(4) if bar else line)
        if loss and self.began and (not bar or self.step != self._logged_step):
            self._logged_step = self.step
            value = events.num_out(float(loss.group(1)))
            out.append(events.Log(t=self._now(), step=self.step, values={"loss": value}))
        return out

    def _bar(self, n: int, total: int, inside: str) -> tuple[int, float]:
        """The run's step from one bar redraw; a new bar of the same length is the next epoch."""
        if self.total == 0:
            self.total = total
        if total == self.total and n < self._bar_n:
            self._offset += self.total
        if total == self.total:
            self._bar_n = n
        rate = _RATE.search(inside)
        seconds = 0.0
        if rate and float(rate.group(1)) > 0:
            seconds = 1 / float(rate.group(1)) if rate.group(2) == "it/s" else float(rate.group(1))
        return (self._offset + n if total == self.total else self.step), seconds

    def _begin(self) -> list[events.AnyEvent]:
        if self.began:
            return []
        self.began = True
        now = self._now()
        return [events.TrainBegin(t=now, max_steps=self.total, num_epochs=0.0, controls=SIGNAL_CONTROLS,
                                  pause_mode="signal"),
                events.State(t=now, state=events.TRAINING, reason="steps read from the command's output")]

    def _now(self) -> float:
        return float(self.clock())  # type: ignore[operator]
