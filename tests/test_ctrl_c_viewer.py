"""Ctrl-C in the viewer of a live run detaches (as `d` does): the training goes on and the shell is told how to
come back. Textual's own Ctrl-C only hinted "press ctrl+q to quit"; a training monitor must never make a reflex
Ctrl-C (or Ctrl-Q) stop the training, nor leave without a word."""

from __future__ import annotations

from pathlib import Path

import pytest

from textual.widgets._footer import FooterKey

from loratui import events
from loratui.rundir import RunDir
from loratui.sources.runlog import ListSource
from loratui.tui.app import LoratuiApp, farewell
from tests import scenarios


class Sent(list[str]):
    """A control channel that records what the viewer sent."""

    def __call__(self, command: str) -> None:
        self.append(command)


async def _settled(pilot, app: LoratuiApp, step: int) -> None:  # type: ignore[no-untyped-def]
    for _ in range(200):
        await pilot.pause(0.05)
        if app.run_state.step >= step:
            return


@pytest.mark.parametrize("key", ["ctrl+c", "ctrl+q"])
async def test_ctrl_c_detaches_from_a_live_run_and_sends_nothing(key: str, tmp_path: Path) -> None:
    sent = Sent()
    app = LoratuiApp(ListSource(scenarios.run(5)), send=sent)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settled(pilot, app, 5)
        await pilot.press(key)
        await pilot.pause(0.2)
    assert app.return_value == "detach" and sent == []
    said = farewell(RunDir(tmp_path / "20270115-093000-qwen7b"), app.run_state, app.return_value)
    assert "training continues" in said and "loratui attach 20270115-093000-qwen7b" in said, said


async def test_ctrl_c_under_the_quit_question_detaches_too() -> None:
    sent = Sent()
    app = LoratuiApp(ListSource(scenarios.run(5)), send=sent)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settled(pilot, app, 5)
        await pilot.press("q")
        await pilot.pause(0.2)
        assert app.screen.__class__.__name__ == "Choice"
        await pilot.press("ctrl+c")
        await pilot.pause(0.2)
    assert app.return_value == "detach" and sent == []


async def test_ctrl_c_on_a_finished_run_just_quits() -> None:
    found = scenarios.run(5)
    found.append(events.End(t=found[-1].t + 1, state=events.FINISHED, exit_code=0, step=5))
    app = LoratuiApp(ListSource(found), send=Sent())
    async with app.run_test(size=(80, 24)) as pilot:
        await _settled(pilot, app, 5)
        for _ in range(100):
            await pilot.pause(0.05)
            if app.run_state.state == events.FINISHED:
                break
        await pilot.press("ctrl+c")
        await pilot.pause(0.2)
    assert app.return_value == "quit"


async def test_the_footer_names_ctrl_c_beside_detach() -> None:
    app = LoratuiApp(ListSource(scenarios.run(5)), send=Sent())
    async with app.run_test(size=(80, 24)) as pilot:
        await _settled(pilot, app, 5)
        labels: dict[str, str] = {}
        for _ in range(100):  # the footer composes its keys after the first refresh: wait for them, not a fixed time
            labels = {k.key_display: k.description for k in app.query(FooterKey)}
            if labels:
                break
            await pilot.pause(0.05)
    assert labels.get("d/^c") == "detach", labels
