"""The app's part in leaving a run alone: `k` shows every rank's stacks, a live alert rings the bell."""

from __future__ import annotations

import time
from pathlib import Path

from loratui import events
from loratui.sources.runlog import ListSource
from loratui.tui.app import LoratuiApp, RunActions
from tests import scenarios
from tests.test_app import Sent


def _actions(stacks: list[str]) -> RunActions:
    def dump() -> str:
        stacks.append("asked")
        return "=== rank 0 ===\nThread 0x1 (most recent call first):\n  File \"x.py\", line 3 in injected_hang"

    return RunActions(send=Sent(), write_fix=lambda *a: (Path("x"), {}), restart=lambda *a: None,  # type: ignore[arg-type,return-value]
                      stacks=dump)


async def test_k_shows_every_ranks_stacks() -> None:
    asked: list[str] = []
    app = LoratuiApp(ListSource(scenarios.run(3)), actions=_actions(asked))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("k")
        for _ in range(400):  # up to 20 s on a loaded machine; it ends when the condition holds
            await pilot.pause(0.05)
            if app.screen.query("#page"):
                break
        from textual.widgets import Static

        page = str(app.screen.query_one("#page", Static).render())
    assert asked == ["asked"] and "injected_hang" in page and "rank 0" in page


async def test_a_live_alert_rings_the_bell_and_history_does_not() -> None:
    now = time.time()
    found = scenarios.run(3) + [
        events.Notice(t=now - 3600, level="error", key="alert", message="hung: an hour ago"),
        events.Notice(t=now + 1, level="error", key="alert", message="CUDA out of memory: enable checkpointing")]
    app = LoratuiApp(ListSource(found), send=Sent())
    rings: list[int] = []
    app.bell = lambda: rings.append(1)  # type: ignore[method-assign]
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(400):  # up to 20 s on a loaded machine; it ends when the condition holds
            await pilot.pause(0.05)
            if rings:
                break
        await pilot.pause(0.2)
    assert rings == [1]


async def test_k_on_a_run_that_has_ended_says_so_instead_of_asking() -> None:
    """`k` on a finished run said "asking every rank for its stacks…" and, over it, "no trainer process is
    running; nothing to dump": two messages that contradict each other, for a question that had no one to ask."""
    asked: list[str] = []
    found = scenarios.run(3) + [events.End(t=scenarios.T0 + 99, state=events.FINISHED, step=3)]
    app = LoratuiApp(ListSource(found), actions=_actions(asked))
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(400):  # up to 20 s on a loaded machine; it ends when the condition holds
            await pilot.pause(0.05)
            if app.run_state.state == events.FINISHED:
                break
        await pilot.press("k")
        await pilot.pause(0.3)
        said = [n.message for n in app._notifications]
        paged = bool(app.screen.query("#page"))
    assert asked == [] and not paged, said
    assert said == ["the run has finished: no process is left to show stacks of"], said
