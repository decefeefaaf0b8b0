"""The supervisor's eye on its run: the advisor and the hang detector folded over the log as it grows, and
the alerts they raise (to the user's endpoint, and as `alert` notices an attached viewer rings for).

Fed by the supervisor's status thread (about once a second), so nothing here runs in the training loop.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from loratui import events
from loratui.logic import clock, guard_verdict
from loratui.logic.advisor import Advisor
from loratui.logic.advisor.oom_advice import ran_out
from loratui.logic.advisor.render import change_line, headline
from loratui.logic.hang import HangWatch, describe
from loratui.recipe import Recipe
from loratui.supervisor.alerts import Alert, Notifier
from loratui.supervisor.command import suspend_reason

_FINDINGS = (("nan", "nan_loss", "NaN/Inf loss"), ("divergence", "loss_diverging", "loss diverging"))


class RunWatch:
    """Advice, hangs and alerts for one run (one trainer life at a time: `restart` starts afresh)."""

    def __init__(self, run_id: str, recipe: Recipe, write: Callable[[events.AnyEvent], None],
                 notifier: Notifier | None = None, on_hang: Callable[[str], None] | None = None,
                 on_bad_loss: Callable[[], None] | None = None) -> None:
        self.run_id, self.write, self.notifier = run_id, write, notifier
        self.on_hang, self.on_bad_loss = on_hang, on_bad_loss
        self.wanted = set(recipe.alerts.events)
        self.lock = threading.Lock()
        self.last_loss: float | None = None
        self.first_loss: float | None = None
        self.started: float | None = None
        self.newest_t: float | None = None
        self.covered_s = 0.0
        """The run's time so far (logic/clock.py: never negative when the wall clock is set back)."""
        self.run_peak = 0
        self.losses: deque[tuple[int, float]] = deque(maxlen=5000)
        """(step, loss) of the run, across lives: the loss at the checkpoint a restart resumes from."""
        self.gpu = False
        self.pids_match = False
        """Whether NVML's pids were seen to match the run's (not in a container): see events.others_used."""
        self.expect: guard_verdict.Expectation | None = None
        """What the last guard action promised, until the restarted life's first steps are judged."""
        self.quiet = False
        """Folding history (feed_quietly): findings are marked as fired, nothing is recorded or sent."""
        self.requeue_job = ""
        """The Slurm job a suspend before its time limit requeues (time_limit.py): its next start resumes the
        run, so the suspend's alert must not send the user to `loratui resume`."""
        self.state = ""
        """The run's state as the log last said it: a state said again (the supervisor adds its reason to the
        trainer's `suspended`) is not a new moment to alert."""
        self.restart(recipe)

    def restart(self, recipe: Recipe) -> None:
        """A new trainer life (after a guard action): fresh advice for the recipe it runs."""
        self.recipe = recipe
        self.advisor = Advisor(recipe)
        self.hang = HangWatch(recipe.monitor.hang_factor, recipe.monitor.hang_min_s)
        self.fired: set[str] = set()
        self.life_peak = 0
        """This trainer life's own device-used peak (bytes; other processes' memory left out): what its
        estimate and a guard verdict are checked against."""
        self.life_others = 0
        """The most other processes held on the card during this life (bytes), said beside the peak."""

    def feed_quietly(self, found: Iterable[events.AnyEvent]) -> None:
        """Fold the history a new supervisor adopts (a requeued job's, a resume's): its alerts went out when
        they happened; said again, a stale "suspended ... `loratui resume`" reached the phone on every start."""
        self.quiet = True
        try:
            self.feed(found)
        finally:
            self.quiet = False

    def feed(self, found: Iterable[events.AnyEvent]) -> None:
        """Fold new events of the log; raise the alerts they call for."""
        now = time.monotonic()  # the hang watch times silences on it: a wall clock step is none
        with self.lock:
            for e in found:
                self.advisor.feed(e)
                self.hang.feed(e, now)
                self._event(e)
            self._findings()

    def tick(self, now: float | None = None) -> None:
        """Ask the hang detector (the supervisor calls this about once a second); `now` is monotonic."""
        with self.lock:
            hang = self.hang.check(time.monotonic() if now is None else now)
        if hang is not None:
            message = f"{describe(hang)}; `loratui stacks {self.run_id}` shows where each rank waits"
            self.write(events.Notice(t=time.time(), level="error", key="hung", message=message))
            if self.on_hang is not None:
                self.on_hang(message)

    def expect_after_restart(self, expect: guard_verdict.Expectation) -> None:
        """A guard action restarted the trainer: judge its first steps (call after `restart`)."""
        self.expect = expect

    def _event(self, e: Any) -> None:
        if self.started is None:
            self.started = e.t
        self.covered_s, self.newest_t = clock.advance(self.covered_s, self.newest_t, e.t)
        if isinstance(e, events.Sample):
            self.pids_match = self.pids_match or bool(e.run_pids)
            others = events.others_used(e, self.pids_match)
            if e.run_pids or not self.pids_match:  # once pids match, a window without the run's is not its own:
                self.life_peak = max(self.life_peak, e.used_max - others)  # the last life dying, a neighbour
            self.life_others = max(self.life_others, others)
            self.run_peak = max(self.run_peak, e.used_max)
            self.gpu = True
        if isinstance(e, events.Log) and e.values.get("loss") is not None:
            self.last_loss = events.logged_loss(e.values)  # NaN steps logged as 0.0 are NaN, not a zero loss
            if self.last_loss is not None and not events.is_train_summary(e.values):
                self.losses.append((e.step, self.last_loss))
                self.first_loss = self.last_loss if self.first_loss is None else self.first_loss
        if self.expect is not None:
            self._watch_restart(e)
        if isinstance(e, events.End):
            self._end(e)
        elif isinstance(e, events.State):
            if e.state == events.SUSPENDED and self.state != events.SUSPENDED:
                # no GPU reading came: a CPU box
                self.alert("suspended", "suspended", self._suspend_said())
            self.state = e.state
        elif isinstance(e, events.Notice) and e.key == "time_limit":
            self.alert("time_limit", "Slurm time limit", e.message, urgent=e.level == "error")
        elif isinstance(e, events.Notice) and e.key == "hung":
            self.alert("hung", "looks hung", e.message, urgent=True)
        elif isinstance(e, events.Notice) and e.key == "guard":
            self.alert("guard", "guard action", e.message, urgent=True)

    def _watch_restart(self, e: Any) -> None:
        expect = self.expect
        assert expect is not None
        if isinstance(e, events.Estimate):
            expect.predicted_gib = e.peak_device_gib
        elif isinstance(e, events.Step) and e.rank == 0 and e.step > expect.resume_step:
            expect.steps += 1
            expect.last_step = max(expect.last_step, e.step)
        elif isinstance(e, events.Log) and e.step > expect.resume_step and self.last_loss is not None \
                and "loss" in e.values and not events.is_train_summary(e.values):
            expect.losses.append(self.last_loss)
            expect.logged_step = max(expect.logged_step, e.step)
        if expect.due():
            self.verdict(guard_verdict.judge(expect, self.life_peak, self.gpu, self.life_others))

    def verdict(self, verdict: guard_verdict.Verdict) -> None:
        """Record and alert the verdict on the last guard action; the next one starts a new expectation."""
        self.expect = None
        self.write(events.Notice(t=time.time(), level="info" if verdict.recovered else "error", key="guard_verdict",
                                 message=verdict.text()))
        # The title says the verdict, the body its evidence: each once (the body was the whole text, so a push
        # read "NOT recovered" twice and its record "NOT recovered: guard verdict: NOT recovered: ...").
        self.alert("guard", verdict.title, "; ".join(verdict.evidence), urgent=not verdict.recovered)

    def _end(self, e: events.End) -> None:
        step = max(e.step, self.advisor.ctx.step)
        if e.cause:  # the scheduler ended it (Slurm's TIMEOUT, CANCELLED, OUT_OF_MEMORY...): always worth a word
            first = e.error.strip().splitlines()[0] if e.error.strip() else e.cause
            self.alert("failed", f"ended by Slurm: {e.cause}", f"{first}; at step {step}", urgent=True)
        elif e.state == events.FINISHED:
            self.alert("finished", "finished", self._summary(step))
        elif e.state == events.FAILED:
            items = self.advisor.items()  # the first advice, as doctor, the panel and headless say it
            diagnosis = headline(items) or (e.error.strip().splitlines() or ["no diagnosis"])[-1]
            change = change_line(items[0].change) if items else ""
            self.alert("failed", "failed", diagnosis + (f"\nchange: {change}" if change else ""), urgent=True)

    def _summary(self, step: int) -> str:
        """The final alert's account: steps, the loss from first to last, the peak, how long it took."""
        from loratui.logic import fmt

        parts = [f"step {step}"]
        if self.last_loss is not None:
            first = f"{self.first_loss:.4g} → " if self.first_loss is not None and self.first_loss != self.last_loss else ""
            parts.append(f"loss {first}{self.last_loss:.4g}")
        if self.run_peak:
            parts.append(f"peak VRAM {self.run_peak / (1 << 30):.1f} GiB")
        if self.started is not None:
            parts.append(f"in {fmt.duration(self.covered_s)}")
        return ", ".join(parts) + f"; `loratui report {self.run_id}` tells the whole story"

    def _findings(self) -> None:
        adv = self.advisor
        if adv.oom is not None and "oom" not in self.fired:
            self.fired.add("oom")
            top = next((a for a in adv.items() if a.id.startswith("oom")), None)
            self.alert("oom", ran_out(adv.oom.facts["report"]), top.title if top else
                       "the trainer ran out of GPU memory", urgent=True)
        for kind, advice_id, title in _FINDINGS:
            if advice_id in adv.found and kind not in self.fired:
                self.fired.add(kind)
                advice = next((a for a in adv.items() if a.id == advice_id), None)
                self.alert(kind, title, advice.title if advice else title, urgent=True)
                if self.on_bad_loss is not None:
                    self.on_bad_loss()
        if adv.vram.current is not None and "over_line" not in self.fired:
            self.fired.add("over_line")
            advice = next((a for a in adv.items() if a.id == "vram_near_limit"), None)
            self.alert("over_line", "over the VRAM warning line", advice.title if advice else "")

    def _suspend_said(self) -> str:
        if self.requeue_job:
            return (f"checkpoint saved before the time limit; Slurm job {self.requeue_job} is being requeued: its "
                    "next start resumes this run from that checkpoint (no `resume` needed)")
        return suspend_reason(self.gpu)

    def alert(self, event: str, title: str, message: str, urgent: bool = False) -> None:
        """Record the alert (without the endpoint) and send it when the recipe asks for this event.

        The run's end is not recorded again: the End event is the log's last word (viewers stop there)."""
        if self.quiet:
            return
        if event not in ("finished", "failed"):
            self.write(events.Notice(t=time.time(), level="error" if urgent else "info", key="alert",
                                     message=_headed(title, message)[:2000]))
        if self.notifier is not None and event in self.wanted:
            self.notifier.send(Alert(event, f"loratui {self.run_id}: {title}", message, self.run_id, urgent))


def _headed(title: str, message: str) -> str:
    """'title: message', without saying the title twice when the message begins with it."""
    return message if message.lower().startswith(title.lower()) else f"{title}: {message}"
