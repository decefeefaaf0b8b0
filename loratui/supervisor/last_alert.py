"""`python -m loratui.supervisor.last_alert RUN`: the run's final alert when its supervisor is gone.

A trainer whose supervisor died writes the run's end itself (trainer/orphan.py); the alert the supervisor
would have sent at that end (finished, or failed with its diagnosis) is sent from here, started by module
name so the trainer imports nothing of the owner side and never holds the secret itself. The text is the
supervisor's own: the log is folded through the same RunWatch, and only the end's alert goes out (the
others were the supervisor's to send while it lived).
"""

from __future__ import annotations

import sys
from pathlib import Path

from loratui.eventlog import read_log
from loratui.rundir import RunDir
from loratui.supervisor import alerts
from loratui.supervisor.watch import RunWatch

FINAL = frozenset({"finished", "failed"})


class _EndOnly:
    """A notifier that forwards only the run's end."""

    def __init__(self, notifier: alerts.Notifier) -> None:
        self.notifier = notifier

    def send(self, alert: alerts.Alert) -> bool:
        return self.notifier.send(alert) if alert.event in FINAL else False


def send_final(run: RunDir) -> bool:
    """Fold the log and send the end's alert where the run's alerts go; False when there is nothing to do."""
    recipe, _ = run.load_recipe()
    url = alerts.saved_target(run)
    if recipe is None or not url:
        return False
    found = read_log(run.events).events
    if not found or type(found[-1]).__name__ != "End":
        return False
    notifier = alerts.Notifier(url, recipe.alerts.format, recipe.alerts.min_interval_s)
    watch = RunWatch(run.run_id, recipe, lambda event: None, _EndOnly(notifier))  # type: ignore[arg-type]
    watch.feed(found)
    notifier.close(timeout_s=60.0)
    return notifier.sent > 0


if __name__ == "__main__":
    sys.exit(0 if send_final(RunDir(Path(sys.argv[1]))) else 1)
