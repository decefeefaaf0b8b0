"""The status line at 80 columns keeps its last figure whole: trial 14's Slurm run at `step 1965/4000 ... ep 26.20
tok/s 141  ETA 20m06s` read `elapsed 5m5…` (the bar's width took a fixed 62 columns for the rest of the line)."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult

from loratui import events
from loratui.logic.runstate import RunState
from loratui.tui.widgets.status import StatusBar


class _One(App[None]):
    def compose(self) -> ComposeResult:
        yield StatusBar()


def _state(step: int, total: int) -> RunState:
    return RunState().feed_all([
        events.Header(t=0.0, schema=1, run_id="20261206-005826-train", recipe_hash="h", name="train"),
        events.State(t=0.0, state=events.TRAINING, step=0),
        events.TrainBegin(t=0.0, max_steps=total, num_epochs=60.0, device="cpu"),
        events.Step(t=352.0, step=step - 1, epoch=26.19, step_time=0.6, tokens=160),
        events.Step(t=353.0, step=step, epoch=26.2, step_time=0.6, tokens=160)])


@pytest.mark.parametrize(("step", "total", "width"), [(1965, 4000, 80), (19650, 40000, 80), (5, 300, 80),
                                                      (1965, 4000, 200)])
async def test_the_step_line_ends_whole(step: int, total: int, width: int) -> None:
    app = _One()
    async with app.run_test(size=(width, 5)) as pilot:
        bar = app.query_one(StatusBar)
        bar.show(_state(step, total), now=353.0)
        await pilot.pause()
        line = bar.text.splitlines()[1]
    assert "…" not in line and line.rstrip().endswith("elapsed 5m53s") and len(line) <= width, line
