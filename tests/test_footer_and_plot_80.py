"""Issue 26 item 15: at 80 columns the footer reads right (`aA advice ? help`, the replay's keys whole with
g/G), the LR view of a plain loop says it has no data, and the loss axis labels stand evenly apart."""

from __future__ import annotations

import re

from textual.widget import Widget
from textual.widgets import Footer

from loratui import events
from loratui.sources.runlog import ListSource
from loratui.tui.app import LoratuiApp, RunActions
from loratui.tui.replay_app import replay_app
from loratui.tui.widgets.loss_plot import LossPlot
from tests import scenarios
from tests.test_advice import recipe
from tests.test_app import Sent, _settle


def _text(widget: Widget) -> str:
    """What a widget shows, row by row (its own rendering, as the screen composes it)."""
    return "\n".join("".join(seg.text for seg in widget.render_line(y)) for y in range(widget.size.height))


def _footer(app: LoratuiApp) -> str:
    """The footer's one line as the screen shows it: each key at its column."""
    footer = app.screen.query_one(Footer)
    line = [" "] * app.size.width
    for part in footer.query("*"):
        if part.region.height:
            for i, ch in enumerate("".join(seg.text for seg in part.render_line(0))):
                if part.region.x + i < len(line):
                    line[part.region.x + i] = ch
    return "".join(line).rstrip()


async def test_the_footer_with_an_appliable_advice_is_readable_at_80_columns() -> None:
    actions = RunActions(send=Sent(), write_fix=lambda *a: None, restart=lambda *a: None, stacks=lambda: "")
    app = LoratuiApp(ListSource(scenarios.run(60, peak_gib=33.5)), recipe=recipe(), actions=actions)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot, app, 60)
        app.redraw()
        await pilot.pause(0.3)
        assert app.check_action("apply_advice", ())  # `A` is offered: the a/A group shows
        line = _footer(app)
        assert "aA advice ? help" in line, line  # was `aA advice? help`
        assert " lr aA advice" in line, line  # was `t lr  aA advice`: Textual pads a compact group on its left too


async def test_the_replay_footer_fits_80_columns_with_g_and_g() -> None:
    app = replay_app(scenarios.run(60), None, "a", speed=1)
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(400):  # until the footer is composed (a loaded box is slow)
            await pilot.pause(0.05)
            if "help" in _footer(app):
                break
        line = _footer(app)
        assert "gG start/end" in line and "[] event" in line and "-+ speed" in line, line  # was cut: "next even"
        assert len(line) < 80


def _plain_loop(n: int = 40) -> list[events.AnyEvent]:
    """A loop that logs only its loss: no learning rate, no grad norm."""
    found = [e for e in scenarios.run(n) if not isinstance(e, events.Log)]
    return found + [events.Log(t=scenarios.T0 + 30 + i, step=i, values={"loss": 2.0 - i / 40}) for i in range(1, n + 1)]


async def test_the_lr_view_of_a_plain_loop_says_there_is_no_data() -> None:
    app = LoratuiApp(ListSource(_plain_loop()))
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot, app, 40)
        await pilot.press("t")
        app.redraw()
        await pilot.pause(0.3)
        assert "no learning rate or grad norm in this run's logs" in _text(app.query_one(LossPlot))


async def test_loss_axis_labels_are_evenly_spaced_at_80x24() -> None:
    app = LoratuiApp(ListSource(scenarios.run(60)))
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot, app, 60)
        app.redraw()
        await pilot.pause(0.3)
        rows = _text(app.query_one(LossPlot)).splitlines()
        labels = [(i, float(m.group(1))) for i, row in enumerate(rows) if (m := re.match(r"\s*(-?\d+\.\d+)┤", row))]
        assert len(labels) >= 2, rows
        gaps = {round((b - a) / (j - i), 2) for (i, a), (j, b) in zip(labels, labels[1:])}
        assert len(gaps) == 1, labels  # an equal value per row between every pair of labels


def test_the_lr_view_drawn_while_its_pane_has_no_width_yet() -> None:
    """`l` (the trainer's output over the plot), then `l` and `t` at once under tmux: the plot drew its learning
    rate before the layout gave it its width back, and `_thin(points, 0)` divided by zero: the replay died with a
    traceback (the loss view asks for at least 50 points and never did)."""
    from loratui.logic.runstate import RunState
    from loratui.tui.widgets.loss_plot import _thin
    points = [(i, 1.0 / i) for i in range(1, 30)]
    assert _thin(points, 0)[-1] == points[-1]
    plot = LossPlot()  # not laid out: its size is 0 x 0, as a pane just shown again
    assert plot.size.width == 0
    state = RunState(lr=points, grad_norm=[(s, 2.0) for s, _ in points], loss=points)
    plot.toggle(state)  # to the lr view: was ZeroDivisionError
    assert plot.view == "lr" and "learning rate" in str(plot.border_title)
