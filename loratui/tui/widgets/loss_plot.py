"""The loss curve: raw and smoothed loss against step, eval loss, NaN steps marked; lr/grad norm view."""

from __future__ import annotations

import math

from textual_plotext import PlotextPlot

from loratui.logic.runstate import RunState
from loratui.logic.series import ema


class LossPlot(PlotextPlot):
    """Plots through its own `self.plt`, redrawn only when new points arrive."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.border_title = "loss"
        self.view = "loss"  # or "lr"
        self.compare: RunState | None = None
        """A second run whose loss is overlaid (replay A B)."""
        self._key: tuple[object, ...] = ()

    def toggle(self, state: RunState) -> None:
        """Switch between the loss and the learning-rate / grad-norm views."""
        self.view = "lr" if self.view == "loss" else "loss"
        self._key = ()
        self.show(state)

    def show(self, state: RunState) -> None:
        """Replot when the series grew."""
        key = (self.view, len(state.loss), len(state.eval_loss), len(state.lr), self.size)
        if key == self._key:
            return
        self._key = key
        self.plt.clear_data()
        self.plt.clear_figure()
        if self.view == "loss":
            self._plot_loss(state)
        else:
            self._plot_lr(state)
        self.refresh()

    def _plot_loss(self, state: RunState) -> None:
        self.border_title = "loss (t: lr / grad norm)"
        points = _thin(state.loss, max(50, self.size.width * 2))
        finite = [(s, v) for s, v in points if math.isfinite(v)]
        if finite:
            xs, ys = zip(*finite)
            self.plt.plot(xs, ys, marker="hd", color="gray", label="loss")
            self.plt.plot(xs, ema(ys, 0.1), marker="hd", color="cyan", label="smoothed")
        if self.compare is not None:
            other = [(s, v) for s, v in _thin(self.compare.loss, max(50, self.size.width * 2)) if math.isfinite(v)]
            if other:
                xs, ys = zip(*other)
                self.plt.plot(xs, ema(ys, 0.1), marker="hd", color="orange", label=self.compare.name or "B")
        if state.eval_loss:
            xs, ys = zip(*state.eval_loss)
            self.plt.scatter(xs, ys, marker="dot", color="magenta", label="eval")
        for step in state.nan_steps[:20]:
            self.plt.vline(step, "red")
        if state.nan_steps:
            self.border_subtitle = f"NaN at step {state.nan_steps[0]}" + (
                f" (+{len(state.nan_steps) - 1})" if len(state.nan_steps) > 1 else "")
        self._axis_label()

    def _plot_lr(self, state: RunState) -> None:
        self.border_title = "learning rate / grad norm (t: loss)"
        if state.lr:
            xs, ys = zip(*_thin(state.lr, self.size.width * 2))
            self.plt.plot(xs, ys, marker="hd", color="green", label="lr")
        grads = [(s, v) for s, v in state.grad_norm if math.isfinite(v)]
        if grads:
            xs, ys = zip(*_thin(grads, self.size.width * 2))
            self.plt.plot(xs, ys, marker="hd", color="yellow", label="grad norm", yside="right")
        self._axis_label()

    def _axis_label(self) -> None:
        """Label the x axis only where there is room: on 24 rows every line goes to the curve."""
        if self.size.height >= 14:
            self.plt.xlabel("step")


def _thin(points: list[tuple[int, float]], most: int) -> list[tuple[int, float]]:
    """At most about `most` points, evenly strided, always keeping the last and any non-finite one."""
    if len(points) <= most:
        return points
    stride = math.ceil(len(points) / most)
    kept = [p for i, p in enumerate(points) if i % stride == 0 or not math.isfinite(p[1])]
    if kept[-1] is not points[-1]:
        kept.append(points[-1])
    return kept
