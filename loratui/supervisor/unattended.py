"""What lets a run be left alone: alerts, hang detection (with stack dumps) and the opt-in guard, as the
few hooks the supervisor (owner.py) calls: `on_events`, `trainer_env`, `after_exit`, `close`."""

from __future__ import annotations

import threading
import time
from typing import Any

import msgspec

from loratui import events
from loratui.errors import ApplyError
from loratui.logic import guard_verdict
from loratui.logic.advisor import Advisor
from loratui.logic.advisor.advice import Advice
from loratui.recipe import RecipeError
from loratui.rundir import SUSPEND_EXIT, latest_checkpoint
from loratui.supervisor import alerts, stacks
from loratui.supervisor.guard import Action, Guard, count_notices, latest_before
from loratui.supervisor.watch import RunWatch
from loratui.text import inert

RETRY_KEY = "guard_retry"


def _step_of_checkpoint(path: str | None) -> int:
    tail = (path or "").rstrip("/").rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0


class Unattended:
    """Alerts, hangs and the guard for one supervisor."""

    def __init__(self, sup: Any) -> None:
        self.sup = sup
        recipe = sup.recipe
        url, self.alerts_problem = alerts.target_for_run(sup.run, recipe.alerts)
        self.notifier = self._notifier(url)
        self.watch = RunWatch(sup.run.run_id, recipe, sup.log.write, self.notifier, on_hang=self._on_hang,
                              on_bad_loss=self._on_bad_loss)
        self.guard = Guard(sup.run, recipe.guard, sup.log.write)
        self.pending: Action | None = None
        self._why = ""
        self.halted = ""
        """Why the run ends here, when the guard stopped its trainer for a bad loss and then did not restart it (a
        crash loop, the budget spent, a change it could not apply): the trainer's clean exit is no finished run."""
        self._secrets = alerts.secret_names(recipe.alerts)
        self.last_failure: guard_verdict.Failure | None = None
        self.retries = count_notices(sup.run.events, RETRY_KEY)  # a re-adopted run keeps its spent retries
        self.first_restart_t: float | None = None

    def _notifier(self, url: str) -> alerts.Notifier | None:
        section = self.sup.recipe.alerts
        return alerts.Notifier(url, section.format, section.min_interval_s,
                               on_error=self._alert_failed) if url else None

    def announce(self) -> None:
        """Say in the log where alerts go (the host only: the URL is a secret), or why they go nowhere."""
        if self.alerts_problem:
            self.sup.log.write(events.Notice(
                t=time.time(), level="warning", key="alerts",
                message=f"alerts are off: the run's alert URL is not usable ({self.alerts_problem})"))
        if self.notifier is not None:
            self.sup.log.write(events.Notice(
                t=time.time(), level="info", key="alerts",
                message=f"alerts go to {alerts.describe(self.notifier.url, self.notifier.fmt)}"))
        elif not self.alerts_problem and self.sup.recipe.alerts.url_env:
            # The recipe asks for alerts: a run that would end in silence must say so while someone looks.
            name = inert(self.sup.recipe.alerts.url_env, newlines=False)
            self.sup.log.write(events.Notice(
                t=time.time(), level="warning", key="alerts",
                message=f"alerts are off: [alerts] url_env names {name}, which was not set when the run "
                        "started; set it before `loratui run`, or give --notify URL (`loratui resume RUN "
                        "--notify URL` after a suspend)"))

    def reload_alerts(self) -> None:
        """On `resume`: `loratui resume --notify URL` may have stored a new target just before sending it."""
        url = alerts.saved_target(self.sup.run)
        if not url or (self.notifier is not None and url == self.notifier.url):
            return
        old, self.notifier = self.notifier, self._notifier(url)
        self.watch.notifier = self.notifier
        if old is not None:  # what it still holds (the `suspended` alert) goes out off this thread
            threading.Thread(target=old.close, daemon=True).start()
        self.announce()

    def on_events(self, found: list[events.AnyEvent]) -> None:
        """New events of the log (about once a second, possibly none): advice, alerts, the hang check."""
        self.watch.feed(found)
        self.watch.tick()

    def trainer_env(self, env: dict[str, str]) -> dict[str, str]:
        """The trainer's environment without the alert URL (the trainer never needs the secret)."""
        return {k: v for k, v in env.items() if k not in self._secrets}

    def after_exit(self, code: int) -> tuple[bool, str | None]:
        """After the trainer exits: whether the guard restarts it, and from which checkpoint.

        A restarted life that fails before its verdict is judged not recovered; a failure that repeats the
        last one is a crash loop and ends the run; a transient one is retried with the recipe unchanged."""
        action, self.pending = self.pending, None
        self.halted = ""
        again, resume = self._after_exit(action, code)
        if action is not None and code == 0 and not again and not self.sup.stop_requested:
            self.halted = self._why or f"the guard stopped the trainer ({action.kind}) and did not restart it"
        return again, resume

    def _after_exit(self, action: Action | None, code: int) -> tuple[bool, str | None]:
        self._why = ""
        if self.sup.stop_requested or code == SUSPEND_EXIT or not self.guard.config.enabled:
            return False, None
        if code == 0 and action is None:
            return False, None
        failure = self._failure(action, code)
        if self.watch.expect is not None:
            self.watch.verdict(guard_verdict.Verdict(False, [f"the restarted trainer failed again at step "
                                                             f"{failure.step} ({failure.kind})"]))
        loop, self.last_failure = guard_verdict.crash_loop(self.last_failure, failure), failure
        if loop:
            return self._give_up(f"crash loop: {loop}; not restarting again")
        if self._over_budget():
            return self._give_up(f"guard: max_restart_gpu_hours = {self.guard.config.max_restart_gpu_hours:g} spent; "
                                 "not restarting")
        if action is None:
            action = self.guard.after_failure(self.watch.advisor)
        if action is None:
            return self._retry_transient(code)
        try:
            _fixed, env, resume = self.guard.apply(action)
            recipe, why = self.sup.run.load_recipe()  # the copy the guard just wrote, with the overrides
            if recipe is None:
                raise RecipeError(why)
        except (ApplyError, RecipeError, OSError) as exc:
            self._why = f"guard: the change could not be applied: {exc}"
            self.sup.log.write(events.Notice(t=time.time(), level="error", key="guard_skip", message=self._why))
            return False, None
        self.sup.recipe = recipe
        self.sup.settings = msgspec.structs.replace(self.sup.settings, env={**self.sup.settings.env, **env})
        self._restarting(action.kind, resume, action.bad_step)
        return True, resume

    def _failure(self, action: Action | None, code: int) -> guard_verdict.Failure:
        advisor = self.watch.advisor
        items = _failure_items(advisor)
        kind = action.kind if action else ("oom" if advisor.oom is not None else (items[0].id if items else f"exit {code}"))
        step = action.bad_step if action and action.bad_step else (advisor.oom.step if advisor.oom else advisor.ctx.step)
        if self.watch.expect is not None:  # a restarted life that died before its first step died at its checkpoint's
            step = max(step, self.watch.expect.resume_step)
        return guard_verdict.Failure(kind, step, latest_checkpoint(self.sup.run.checkpoints))

    def _restarting(self, kind: str, resume: str | None, bad_step: int = 0) -> None:
        """A new trainer life from `resume`: fresh advice, and an expectation its first steps are judged by (and,
        after a NaN or a divergence, its steps past `bad_step`)."""
        self.first_restart_t = self.first_restart_t or time.time()
        step = _step_of_checkpoint(resume)
        warn = self.sup.recipe.monitor.warn_gb
        self.watch.restart(self.sup.recipe)
        self.watch.expect_after_restart(guard_verdict.Expectation(
            kind, step, guard_verdict.resume_loss(list(self.watch.losses), step if resume else 0), warn,
            bad_step=bad_step))

    def _retry_transient(self, code: int) -> tuple[bool, str | None]:
        """A failure with no Python error of its own: retry from the last checkpoint, recipe unchanged."""
        advisor = self.watch.advisor
        why = guard_verdict.transient(code, [item.id for item in _failure_items(advisor)], self.sup.stderr_tail())
        if not why:
            return False, None
        if self.retries >= self.guard.config.max_retries:
            return self._give_up(f"guard: a transient failure ({why}) but max_retries = "
                                 f"{self.guard.config.max_retries} are spent")
        self.retries += 1
        resume = latest_before(self.sup.run.checkpoints, None)
        where = f"from {resume.rsplit('/', 1)[-1]}" if resume else "from the start (no checkpoint yet)"
        message = (f"guard retry {self.retries} of {self.guard.config.max_retries} (transient: {why}): "
                   f"recipe unchanged, restarting {where}")
        self.sup.log.write(events.Notice(t=time.time(), level="warning", key=RETRY_KEY, message=message))
        self.watch.alert("guard", "transient failure, retrying", message, urgent=True)
        self._restarting("retry", resume)
        return True, resume

    def _over_budget(self) -> bool:
        cap = self.guard.config.max_restart_gpu_hours
        if not cap or self.first_restart_t is None:
            return False
        gpus = max(1, len(self.watch.advisor.ctx.ours)) if self.watch.gpu else 0
        return gpus * (time.time() - self.first_restart_t) / 3600 >= cap

    def _give_up(self, why: str) -> tuple[bool, str | None]:
        self._why = why
        self.sup.log.write(events.Notice(t=time.time(), level="error", key="guard_verdict", message=why))
        self.watch.alert("guard", "stopped restarting", why, urgent=True)
        return False, None

    def close(self) -> None:
        """Deliver the alerts still queued (the run's end among them), within a bound."""
        if self.notifier is not None:
            self.notifier.close(timeout_s=30.0)

    def _on_bad_loss(self) -> None:
        """NaN/Inf or divergence while training: with the guard on, stop the trainer and restart it."""
        if self.pending is not None:
            return
        action = self.guard.on_bad_loss(self.watch.advisor, self.sup.recipe.training.learning_rate)
        if action is not None:
            self.pending = action
            threading.Thread(target=self.sup.end_trainer, daemon=True).start()

    def _on_hang(self, message: str) -> None:
        """Record where every rank waits (faulthandler dumps), off the status thread."""
        threading.Thread(target=stacks.collect, args=(self.sup.run, "hung"), daemon=True).start()

    def _alert_failed(self, message: str) -> None:
        self.sup.log.write(events.Notice(t=time.time(), level="warning", key="alert_error", message=message))


def _failure_items(advisor: Advisor) -> list[Advice]:
    """The advisor's items that may say why the trainer failed: not the guard's own account of its moves."""
    return [item for item in advisor.items() if item.id != "guard"]
