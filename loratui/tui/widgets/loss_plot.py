"""The loss curve: raw and smoothed loss against step, eval loss, NaN steps marked; lr/grad norm view.

The legend is in the border title, not in the plot: plotext draws its legend over the first points.
"""

from __future__ import annotations

import math

from rich.text import Text
from textual_plotext import PlotextPlot

from loratui.logic.runstate import RunState
from loratui.logic.series import ema_steps
from loratui.text import inert

NICE_STEPS = (1, 2, 5)
B_RAW, B_RAW_LEGEND = (130, 90, 50), "rgb(130,90,50)"
"""A compared run's logged loss: a dim orange, as A's is grey beside its cyan smoothed line."""
SHORT_ROWS = 8
"""Charts up to this many rows get evenly spaced value ticks of our own (see LossPlot._y_axis)."""
TICK_SPACING = 12
"""Columns per x tick label, about."""


class LossPlot(PlotextPlot):
    """Plots through its own `self.plt`, redrawn only when new points arrive."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.border_title = "loss"
        self.view = "loss"  # or "lr"
        self.compare: RunState | None = None
        """A second run whose loss is overlaid (replay A B)."""
        self.names = ""
        """Beside a compared run, who A and B are ("A tiny (ID) · B tiny (ID)"), under the chart: two runs may
        share a name, and the legend (A loss, B smoothed...) must fit 80 columns."""
        self._key: tuple[object, ...] = ()
        self._shown: RunState | None = None
        """The state last shown (replotted on a resize)."""
        self.last_step: int | None = None
        """The step of the last point drawn (the status bar's step, unless the plot lags it)."""

    def toggle(self, state: RunState) -> None:
        """Switch between the loss and the learning-rate / grad-norm views."""
        self.view = "lr" if self.view == "loss" else "loss"
        self._key = ()
        self.show(state)

    def on_resize(self) -> None:
        """Replot at the new size: plotext redraws by itself, but the value ticks fit the old row count."""
        if self._shown is not None:
            self._key = ()
            self.show(self._shown)

    def show(self, state: RunState) -> None:
        """Replot when the series grew."""
        self._shown = state
        key = (self.view, len(state.loss), len(state.eval_loss), len(state.lr), self.size)
        if key == self._key:
            return
        self._key = key
        self.last_step = state.loss[-1][0] if state.loss else None
        self.plt.clear_data()
        self.plt.clear_figure()
        self.border_subtitle = ""  # a NaN said at a later step is not at the one sought back to
        if self.view == "loss":
            self._plot_loss(state)
        else:
            self._plot_lr(state)
        self.refresh()

    def _thinned(self, points: list[tuple[int, float]]) -> list[tuple[int, float]]:
        """A series thinned to what the pane can draw: two points a column, and 50 at least (a pane not laid out yet
        has no width)."""
        return _thin(points, max(50, self.size.width * 2))

    def _plot_loss(self, state: RunState) -> None:
        # beside a compared run, A's curves are named as B's are (who each is: `names`, under the chart)
        legend = [("A loss", "grey62"), ("A smoothed", "cyan")] if self.compare is not None else [
            ("loss", "grey62"), ("smoothed", "cyan")]
        steps = [s for s, _ in state.loss]
        points = self._thinned(state.loss)
        finite = [(s, v) for s, v in points if math.isfinite(v)]
        shown: list[float] = []
        if finite:
            xs, ys = zip(*finite)
            self.plt.plot(xs, ys, marker="hd", color="gray")
            self.plt.plot(xs, ema_steps(xs, ys, 0.1), marker="hd", color="cyan")
            shown += ys
        if self.compare is not None:
            other = [(s, v) for s, v in self._thinned(self.compare.loss) if math.isfinite(v)]
            if other:  # B as A is drawn: its logged loss (so the y-range holds it) and its smoothed line
                xs, ys = zip(*other)
                self.plt.plot(xs, ys, marker="hd", color=B_RAW)
                self.plt.plot(xs, ema_steps(xs, ys, 0.1), marker="hd", color="orange")
                shown += ys
                steps += xs
                legend += [("B loss", B_RAW_LEGEND), ("B smoothed", "orange1")]
        if state.eval_loss:
            xs, ys = zip(*state.eval_loss)
            self.plt.scatter(xs, ys, marker="dot", color="magenta")
            shown += ys
            legend.append(("eval", "magenta"))
        self.border_title = _legend(legend, "t: lr / grad norm")
        for step in state.nan_steps[:20]:
            self.plt.vline(step, "red")
        said = [f"NaN at step {state.nan_steps[0]}" + (
            f" (+{len(state.nan_steps) - 1})" if len(state.nan_steps) > 1 else "")] if state.nan_steps else []
        if self.compare is not None and self.names:
            said.append(inert(self.names, newlines=False))
        self.border_subtitle = " · ".join(said)
        # over both runs' steps: ticks over A's alone stopped at A's step while B's curve went on
        self._x_axis([(min(steps), 0.0), (max(steps), 0.0)] if steps else [])
        self._y_axis(shown)

    def _y_axis(self, values: list[float]) -> None:
        """On a short chart (80x24 leaves 3 rows), labels on rows an equal value apart: plotext's own ticks
        snap to the nearest row there, so 3.08, 2.48, 1.59 stood an equal distance apart."""
        rows = self._rows()
        finite = [v for v in values if math.isfinite(v)]
        if finite and max(finite) <= min(finite):
            self._one_label(finite[0])
            return
        if not finite or not 2 <= rows <= SHORT_ROWS:
            return
        low, high = min(finite), max(finite)
        ticks = even_ticks(low, high, rows)
        self.plt.ylim(low, high)
        self.plt.yticks(ticks, [_tick_label(t, ticks) for t in ticks])

    def _plot_lr(self, state: RunState) -> None:
        self.border_title = _legend([("learning rate", "green"), ("grad norm (right axis)", "yellow")], "t: loss")
        if not state.lr and not any(math.isfinite(v) for _, v in state.grad_norm):
            # a plain loop that prints only its loss: say so rather than draw an empty box
            self.plt.title("no learning rate or grad norm in this run's logs")
            return
        if state.lr:
            xs, ys = zip(*self._thinned(state.lr))
            self.plt.plot(xs, ys, marker="hd", color="green")
            self._round_axis(list(ys))
        grads = [(s, v) for s, v in state.grad_norm if math.isfinite(v)]
        if grads:
            xs, ys = zip(*self._thinned(grads))
            self.plt.plot(xs, ys, marker="hd", color="yellow", yside="right")
            self._round_axis(list(ys), "right")
        self._x_axis(state.lr or state.grad_norm)

    def _rows(self) -> int:
        """The plot's rows: the pane less its frame, the x ticks and (where there is room) the x label."""
        return self.size.height - 3 - (1 if self.size.height >= 14 else 0)

    def _one_label(self, value: float, yside: str = "left") -> None:
        """One point or a flat series (a constant lr): one label at its value, on its row (plotext's own
        labels read 6.5, 6.5, 6.5, 6.5, or values the series never had)."""
        pad = abs(value) * 0.1 or 0.1
        self.plt.ylim(value - pad, value + pad, yside=yside)
        self.plt.yticks([value], [f"{value:.4g}"], yside=yside)

    def _round_axis(self, values: list[float], yside: str = "left") -> None:
        """Round, evenly spaced labels at least a row apart (plotext's own for the lr read 0.001000,
        0.000950, 0.000850, 0.000800: where its rows fell, in six decimals)."""
        values = [v for v in values if math.isfinite(v)]  # a hostile log's "inf" lr has no round label
        if not values:
            return
        low, high = min(values), max(values)
        if high <= low:
            self._one_label(low, yside)
            return
        rows = self._rows()
        ticks, labels = value_ticks(low, high, 3 + max(0, rows) // 5, (high - low) / max(1, rows - 1))
        if len(ticks) < 2:  # no two round values a row apart (3 rows at 80x24): the series' two ends
            ticks, labels = [low, high], [f"{low:.3g}", f"{high:.3g}"]
        self.plt.yticks(ticks, labels, yside=yside)

    def _x_axis(self, points: list[tuple[int, float]]) -> None:
        """Whole-step ticks; the axis label only where there is room (on 24 rows every line is curve)."""
        if points:
            ticks = step_ticks(points[0][0], points[-1][0], max(2, self.size.width // TICK_SPACING))
            self.plt.xticks(ticks, [str(t) for t in ticks])
        if self.size.height >= 14:
            self.plt.xlabel("step")


def _legend(entries: list[tuple[str, str]], hint: str) -> Text:
    """The border title: each series' name in its colour, then the toggle key's hint."""
    title = Text()
    for name, colour in entries:
        title.append("━ ", style=colour)
        title.append(f"{name}  ")
    title.append(f"({hint})", style="dim")
    return title


def even_ticks(low: float, high: float, rows: int) -> list[float]:
    """Ticks from `low` to `high` that fall exactly on rows of a `rows`-row chart: as many as divide its
    rows - 1 gaps evenly, at most 4."""
    gaps = max(d for d in (1, 2, 3) if (rows - 1) % d == 0)
    return [low + (high - low) * k / gaps for k in range(gaps + 1)]


def _tick_label(value: float, ticks: list[float]) -> str:
    """A tick's value with as many decimals as tell the ticks apart."""
    spacing = abs(ticks[1] - ticks[0]) if len(ticks) > 1 else abs(value) or 1.0
    digits = min(4, max(0, 1 - math.floor(math.log10(spacing)))) if spacing > 0 else 2
    return f"{value:.{digits}f}"


def step_ticks(first: int, last: int, most: int) -> list[int]:
    """At most `most` whole-number ticks from `first` to `last` at a round spacing (1, 2, 5, 10, 20 ...):
    steps are integers, and a tick at 2.5 names no step."""
    if last <= first:
        return [first]
    spacing, scale = 1, 1
    while True:
        for nice in NICE_STEPS:
            spacing = nice * scale
            if (last - first) // spacing + 1 <= most:
                start = -(-first // spacing) * spacing
                ticks = list(range(start, last + 1, spacing))
                return ticks if ticks else [first]
        scale *= 10


def _thin(points: list[tuple[int, float]], most: int) -> list[tuple[int, float]]:
    """At most about `most` points, evenly strided, always keeping the last and any non-finite one (at least one: a
    pane not laid out yet has no width)."""
    most = max(1, most)
    if len(points) <= most:
        return points
    stride = math.ceil(len(points) / most)
    kept = [p for i, p in enumerate(points) if i % stride == 0 or not math.isfinite(p[1])]
    if kept[-1] is not points[-1]:
        kept.append(points[-1])
    return kept


def value_ticks(low: float, high: float, most: int, least_spacing: float = 0.0) -> tuple[list[float], list[str]]:
    """At most `most` ticks from `low` to `high` at a round spacing (0.01, 0.02, 0.05, 0.1 ...) of at least
    `least_spacing`, labelled with as many decimals as the spacing needs; none where the range is one value."""
    if not high > low or most < 1:
        return [], []
    scale = 10.0 ** math.floor(math.log10((high - low) / most))
    while True:
        for nice in NICE_STEPS:
            spacing = nice * scale
            first, last = math.ceil(low / spacing - 1e-9), math.floor(high / spacing + 1e-9)
            if last - first + 1 <= most and spacing >= least_spacing * (1 - 1e-9):
                decimals = max(0, -math.floor(math.log10(spacing) + 1e-9))
                ticks = [k * spacing for k in range(first, last + 1)]
                if decimals > 6 or spacing >= 1e5:  # an exploded grad norm (1e30): no 300-digit label
                    return ticks, [f"{t:.3g}" for t in ticks]
                return ticks, [f"{t:.{decimals}f}" for t in ticks]
        scale *= 10
