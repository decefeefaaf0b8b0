"""The story of a run: the events of note, in order, with their time and step (pure logic).

One notion serves `loratui report` (the Markdown account of a night) and the "while you were away" card: a
start, pauses and resumes (and who asked), suspends, guard actions and verdicts, warnings and errors the run
recorded, the first NaN of each streak, and the end. Steps and losses are not moments; they are the charts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from loratui import events

INFO, WARNING, ERROR = "info", "warning", "error"
GUARD_VERDICT = "guard_verdict"
"""The notice key of the guard's verdict on a restart (supervisor/watch.py writes it)."""


@dataclass(frozen=True)
class Moment:
    """One event of note: when (wall time), at which optimiser step, how serious, and what happened."""

    t: float
    step: int
    level: str
    text: str


ASKED_BY = {"tui": "from the app", "cli": "from the shell", "agent": "by an agent (loratui mcp)",
            "slurm": "by loratui before the Slurm job's time limit"}
"""Who asked, in words (`control.Request.source`): the card said "pause asked by cli", the report "by tui"."""


class Story:
    """Folds events into moments; feed them in log order."""

    def __init__(self, end_in_a_line: Callable[[events.End], str] | None = None) -> None:
        """`end_in_a_line`: what ended the run in one line (tui.failure.in_a_line); by default the error."""
        self.moments: list[Moment] = []
        self._end_in_a_line = end_in_a_line or (lambda end: end.error)
        self.step = 0
        self._held = ""  # the paused or suspended state the run is in, '' while it is not held
        self._held_at: int | None = None  # the moment that said so
        self._in_nan = False

    def feed_all(self, found: Iterable[events.AnyEvent]) -> Story:
        for event in found:
            self.feed(event)
        return self

    def feed(self, e: events.AnyEvent) -> None:
        if isinstance(e, events.Step) and e.rank == 0:
            self.step = max(self.step, e.step)
        elif isinstance(e, events.Header):
            self._add(e.t, INFO, f"started {e.name or e.run_id}")
        elif isinstance(e, events.State):
            self._on_state(e)
        elif isinstance(e, events.Control):
            who = ASKED_BY.get(e.source, f"by {e.source}") if e.source else ""
            self._add(e.t, INFO, f"{e.command} asked" + (f" {who}" if who else ""))
        elif isinstance(e, events.Notice) and (e.level in (WARNING, ERROR) or e.key == GUARD_VERDICT) \
                and not self._repeats(e):  # a verdict is told at any level: "recovered" is news too
            self._add(e.t, e.level, e.message)
        elif isinstance(e, events.Log):
            self._on_log(e)
        elif isinstance(e, events.End):
            why = self._end_in_a_line(e)
            said = f"ended {e.state}" + (f": {why}" if why else "")
            asked = e.state == events.STOPPED and not e.cause  # a stop someone asked for is no error
            self._add(e.t, INFO if e.state == events.FINISHED or asked else ERROR, said, e.step or self.step)

    def since(self, t: float) -> list[Moment]:
        """The moments after wall time `t` (what happened while nobody looked)."""
        return [m for m in self.moments if m.t > t]

    def _repeats(self, e: events.Notice) -> bool:
        """An alert's record ("title: message") of a moment already told: the supervisor logs both."""
        return e.key == "alert" and any(m.text and e.message.endswith(m.text) for m in self.moments[-3:])

    def _add(self, t: float, level: str, text: str, step: int | None = None) -> None:
        self.moments.append(Moment(t, self.step if step is None else step, level, text))

    def _on_state(self, e: events.State) -> None:
        if e.step is not None:
            self.step = max(self.step, e.step)
        noted = {events.PAUSED: "paused", events.SUSPENDED: "suspended"}
        said = noted.get(e.state, "") + (f" ({e.reason})" if e.reason else "")
        if e.state in noted and e.state == self._held:
            # The same hold said again (the supervisor's word after the trainer's, a save while paused):
            # one moment, with the reason where only the repeat gives one.
            if e.reason and self._held_at is not None and self.moments[self._held_at].text == noted[e.state]:
                self.moments[self._held_at] = replace(self.moments[self._held_at], text=said)
        elif e.state in noted:
            self._add(e.t, INFO, said)
            self._held, self._held_at = e.state, len(self.moments) - 1
        elif e.state == events.TRAINING and self._held:
            # A suspended run comes back through starting and loading: it resumed all the same.
            self._add(e.t, INFO, "resumed")
            self._held, self._held_at = "", None

    def _on_log(self, e: events.Log) -> None:
        values = {k: events.num_in(v) for k, v in e.values.items()}
        bad = [k for k in ("loss", "grad_norm") if isinstance(values.get(k), float) and not math.isfinite(values[k])]
        if bad and not self._in_nan:
            self._add(e.t, ERROR, f"{' and '.join(bad)} not finite", e.step)
        if "loss" in values or "grad_norm" in values:
            self._in_nan = bool(bad)
