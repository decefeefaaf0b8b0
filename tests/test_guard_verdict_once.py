"""A guard verdict says "NOT recovered" once (trial 11: the push read 'NOT recovered' as its title and again in
its body, 'guard verdict: NOT recovered: ...', and the alert's record in the log 'NOT recovered: guard verdict:
NOT recovered: ...')."""
from __future__ import annotations

from typing import Any

from loratui import events
from loratui.logic import guard_verdict as gv
from loratui.logic.story import Story
from loratui.recipe import Recipe
from loratui.supervisor.watch import RunWatch


class _Sent:
    def __init__(self) -> None:
        self.alerts: list[Any] = []

    def send(self, alert: Any) -> None:
        self.alerts.append(alert)


def _verdict(recovered: bool) -> tuple[list[events.AnyEvent], list[Any]]:
    written: list[events.AnyEvent] = []
    sent = _Sent()
    watch = RunWatch("r", Recipe(), written.append, notifier=sent)  # type: ignore[arg-type]
    watch.verdict(gv.Verdict(recovered, ["the restarted trainer failed again at step 5 (oom)"]))
    return written, sent.alerts


def test_a_failed_verdict_says_not_recovered_once_in_the_push_and_the_log() -> None:
    written, (alert,) = _verdict(False)
    pushed = f"{alert.title}\n{alert.message}"  # what slack, discord and a phone show
    assert pushed.count("NOT recovered") == 1, pushed
    assert alert.title == "loratui r: guard verdict: NOT recovered" and alert.urgent
    assert alert.message == "the restarted trainer failed again at step 5 (oom)"
    said = [e.message for e in written if isinstance(e, events.Notice)]
    assert said == ["guard verdict: NOT recovered: the restarted trainer failed again at step 5 (oom)"] * 2, said
    # The morning report tells it once (the alert's record repeats the notice, and the story knows it).
    told = [m.text for m in Story().feed_all(written).moments]
    assert told == [said[0]], told


def test_a_recovered_verdict_too() -> None:
    _, (alert,) = _verdict(True)
    assert f"{alert.title}\n{alert.message}".count("recovered") == 1 and not alert.urgent
