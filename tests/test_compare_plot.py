"""Issue 26 item 3: `replay A B` draws B as A is drawn (its logged loss, so the y-range holds it, and its
smoothed line), and a run logged every 10 steps gets a smoothed line that does not lag behind its loss."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from loratui import events
from loratui.logic.runstate import RunState
from loratui.tui.replay_app import replay_app
from loratui.tui.widgets.loss_plot import LossPlot
from tests import scenarios
from tests.test_replay_app import _until


def _every_10_steps(last_loss: float) -> list[events.AnyEvent]:
    """A 200-step run logged every 10 steps, its loss falling from 2.2 to `last_loss`."""
    found = scenarios.run(1, max_steps=200)
    found = [e for e in found if not isinstance(e, (events.Step, events.Log, events.Sample))]
    t = scenarios.T0 + 30
    for i, step in enumerate(range(10, 201, 10)):
        loss = 2.2 + (last_loss - 2.2) * i / 19
        found += [events.Step(t=t + step, step=step, epoch=step / 200, step_time=1.0),
                  events.Log(t=t + step, step=step, values={"loss": loss, "learning_rate": 2e-4})]
    return found


def test_a_smoothed_line_of_a_run_logged_every_10_steps_follows_its_loss() -> None:
    from loratui.logic.series import ema_steps

    state = RunState().feed_all(_every_10_steps(1.26))
    xs, ys = zip(*state.loss)
    assert abs(ema_steps(xs, ys)[-1] - 1.26) < 0.1  # a per-point EMA of 0.1 ended at 1.65
    every, line = list(range(1, 201)), [2.2 - 0.0047 * s for s in range(1, 201)]
    lag_every_step = ema_steps(every, line)[-1] - line[-1]
    lag_every_10 = ema_steps(every[9::10], line[9::10])[-1] - line[-1]
    assert 0 < lag_every_10 <= lag_every_step  # smoothed over steps: no more lag than a run logged each step

async def test_compare_draws_b_logged_loss_and_smoothed_line() -> None:
    other = RunState().feed_all(_every_10_steps(1.00))
    app = replay_app(scenarios.run(60), None, "a", speed=1000, compare=other)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("G")
        await _until(pilot, lambda: app.run_state.step == 60)
        plot = app.query_one(LossPlot)
        drawn: list[list[float]] = []
        real_plot = plot.plt.plot

        def recording(xs: Any, ys: Any, **kwargs: Any) -> Any:
            drawn.append(list(ys))
            return real_plot(xs, ys, **kwargs)

        plot.plt.plot = recording  # the real plot, with what it was given noted
        plot._key = ()
        plot.show(app.run_state)
        b_lines = [ys for ys in drawn if len(ys) == 20]
        assert any(ys[-1] == 1.00 for ys in b_lines), drawn  # B's logged loss is drawn: the y-range holds it
        assert any(ys[-1] != 1.00 and abs(ys[-1] - 1.00) < 0.1 for ys in b_lines)  # and its smoothed line
        assert "B loss" in str(plot.border_title)


async def test_compare_at_80_columns_names_both_runs_and_ticks_both_step_ranges() -> None:
    """The trial: `replay A B` at 80x24 cut the legend ("B tiny (ID) smoothed …", the `t` hint gone), named A
    by no id, and at A's step 30 the x ticks stopped at 30 while B's curve ran on to its step 200."""
    other = RunState().feed_all(_every_10_steps(1.00))
    app = replay_app(scenarios.run(60), None, "A tiny (r-1) · B tiny (r-2)", speed=1, compare=other,
                     start_step=30)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("space")
        await _until(pilot, lambda: 20 < len(app.run_state.loss) and app.run_state.step < 60)
        plot = app.query_one(LossPlot)
        ticked: list[list[int]] = []
        real_xticks = plot.plt.xticks

        def recording(ticks: Any, labels: Any = None, **kwargs: Any) -> Any:
            ticked.append(list(ticks))
            return real_xticks(ticks, labels, **kwargs)

        plot.plt.xticks = recording
        plot._key = ()
        plot.show(app.run_state)
        assert ticked and max(ticked[-1]) == 200 and max(s for s, _ in app.run_state.loss) < 60, ticked
        legend = Text.from_markup(str(plot.border_title)).plain
        assert all(name in legend for name in ("A loss", "A smoothed", "B loss", "B smoothed", "t: lr"))
        assert len(legend) <= 80 - 4 and str(plot.border_subtitle) == "A tiny (r-1) · B tiny (r-2)"


async def test_a_nan_said_under_the_chart_goes_when_replay_seeks_back_before_it() -> None:
    app = replay_app(scenarios.nan_run(), None, "nan", speed=1000)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("space")
        plot = app.query_one(LossPlot)
        await pilot.press("G")
        await _until(pilot, lambda: str(plot.border_subtitle).startswith("NaN at step 35"))
        assert str(plot.border_subtitle).startswith("NaN at step 35")
        await pilot.press("g")
        await _until(pilot, lambda: app.run_state.step < 35 and str(plot.border_subtitle) == "")
        assert app.run_state.nan_steps == [] and str(plot.border_subtitle) == "", plot.border_subtitle
