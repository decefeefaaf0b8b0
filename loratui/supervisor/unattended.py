"""What lets a run be left alone: alerts, hang detection (with stack dumps) and the opt-in guard, as the
few hooks the supervisor (owner.py) calls: `on_events`, `trainer_env`, `after_exit`, `close`."""

from __future__ import annotations

import threading
import time
from typing import Any

import msgspec

from loratui import events
from loratui.errors import ApplyError
from loratui.recipe import RecipeError
from loratui.rundir import SUSPEND_EXIT
from loratui.supervisor import alerts, stacks
from loratui.supervisor.guard import Action, Guard
from loratui.supervisor.watch import RunWatch


class Unattended:
    """Alerts, hangs and the guard for one supervisor."""

    def __init__(self, sup: Any) -> None:
        self.sup = sup
        recipe = sup.recipe
        self.notifier = self._notifier(alerts.url_for_run(sup.run, recipe.alerts))
        self.watch = RunWatch(sup.run.run_id, recipe, sup.log.write, self.notifier, on_hang=self._on_hang,
                              on_bad_loss=self._on_bad_loss)
        self.guard = Guard(sup.run, recipe.guard, sup.log.write)
        self.pending: Action | None = None
        self._secrets = alerts.secret_names(recipe.alerts)

    def _notifier(self, url: str) -> alerts.Notifier | None:
        section = self.sup.recipe.alerts
        return alerts.Notifier(url, section.format, section.min_interval_s,
                               on_error=self._alert_failed) if url else None

    def announce(self) -> None:
        """Say in the log where alerts go (the host only: the URL is a secret)."""
        if self.notifier is not None:
            self.sup.log.write(events.Notice(
                t=time.time(), level="info", key="alerts",
                message=f"alerts go to {alerts.describe(self.notifier.url, self.notifier.fmt)}"))

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
        """After the trainer exits: whether the guard restarts it, and from which checkpoint."""
        action, self.pending = self.pending, None
        if self.sup.stop_requested or code == SUSPEND_EXIT:
            return False, None
        if action is None and code != 0:
            action = self.guard.after_failure(self.watch.advisor)
        if action is None:
            return False, None
        try:
            _fixed, env, resume = self.guard.apply(action)
            recipe, why = self.sup.run.load_recipe()  # the copy the guard just wrote, with the overrides
            if recipe is None:
                raise RecipeError(why)
        except (ApplyError, RecipeError, OSError) as exc:
            self.sup.log.write(events.Notice(t=time.time(), level="error", key="guard_skip",
                                             message=f"guard: the change could not be applied: {exc}"))
            return False, None
        self.sup.recipe = recipe
        self.sup.settings = msgspec.structs.replace(self.sup.settings, env={**self.sup.settings.env, **env})
        self.watch.restart(recipe)
        return True, resume

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
