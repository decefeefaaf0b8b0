"""Issue 26 item 14: the run finishing under the quit dialog no longer leaves it offering "Stop the run",
nor the footer offering pause/suspend/save/stop."""

from __future__ import annotations

from textual.widgets._footer import FooterKey

from loratui import events
from loratui.sources.runlog import ListSource
from loratui.tui.app import LoratuiApp
from tests import scenarios
from tests.test_app import Sent, _settle


def _finish(app: LoratuiApp, source: ListSource) -> None:
    t = scenarios.T0 + 999
    source.extend([events.State(t=t, state=events.FINISHED, step=5), events.End(t=t, state=events.FINISHED, step=5)])
    app._poll_source()  # the worker ended with the list; start it again on the new events


async def _until(pilot, done) -> None:  # type: ignore[no-untyped-def]
    for _ in range(400):
        await pilot.pause(0.05)
        if done():
            return


def _answers(app: LoratuiApp) -> list[str]:
    return [label for _, label, _ in getattr(app.screen, "answers", [])]


def _footer(app: LoratuiApp) -> set[str]:
    return {key.key for key in app.screen.query(FooterKey)}


async def test_quit_dialog_follows_the_run_ending_under_it() -> None:
    source = ListSource(scenarios.run(5))
    app = LoratuiApp(source, send=Sent())
    async with app.run_test(size=(120, 30)) as pilot:
        await _settle(pilot, app, 5)
        await pilot.press("q")
        await pilot.pause(0.2)
        assert "Stop the run" in _answers(app)
        _finish(app, source)
        await _until(pilot, lambda: "Stop the run" not in _answers(app))
        assert "Stop the run" not in _answers(app) and "Quit" in _answers(app)
        await pilot.press("escape")  # stay
        await _until(pilot, lambda: not _answers(app))
        await pilot.pause(0.3)
        assert not {"p", "P", "s", "x"} & _footer(app), _footer(app)
        await pilot.press("q")  # an ended run: q leaves at once
    assert app.return_value == "quit"


async def test_stop_dialog_closes_when_the_run_ends() -> None:
    source = ListSource(scenarios.run(5))
    app = LoratuiApp(source, send=(sent := Sent()))
    async with app.run_test(size=(120, 30)) as pilot:
        await _settle(pilot, app, 5)
        await pilot.press("x")
        await pilot.pause(0.2)
        assert "Stop" in _answers(app)
        _finish(app, source)
        await _until(pilot, lambda: not _answers(app))
        assert not _answers(app)
        await pilot.pause(0.3)
        assert not {"p", "P", "s", "x"} & _footer(app), _footer(app)
    assert sent == []
