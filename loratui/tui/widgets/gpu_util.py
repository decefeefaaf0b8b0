"""The GPU utilisation pane: a 0–100% sparkline per GPU with the mean over the last minute."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from loratui.logic.chart import sparkline
from loratui.logic.runstate import RunState
from loratui.logic.series import mean
from loratui.tui.widgets.vram import gpu_none


class UtilPane(Widget):
    """One row per GPU: sparkline, and the last minute's mean utilisation."""

    DEFAULT_CSS = "UtilPane { height: 3; }"

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.border_title = "GPU util"
        self._state: RunState | None = None
        self._key: tuple[object, ...] = ()

    def show(self, state: RunState) -> None:
        """Take the run's state; redraw when new samples arrived."""
        self.display = not gpu_none(state)  # the VRAM pane's one line says it for both
        key = tuple((i, len(g.utils), g.utils[-1][0] if g.utils else None) for i, g in state.gpus.items())
        self._state = state
        if key + (self.size,) == self._key:
            return
        self._key = key + (self.size,)
        self.refresh()

    def render(self) -> Text:
        state = self._state
        width = self.content_size.width
        if state is None or not state.gpus or width < 20:
            # The VRAM pane above already says why there is no GPU: one reason, said once.
            return Text("utilisation: N/A" + (" (see VRAM)" if state and state.gpu_reason else ""), style="dim")
        text = Text()
        for index, gpu in sorted(state.gpus.items()):
            values = [u for _, u in gpu.utils]
            now = gpu.utils[-1][0] if gpu.utils else 0.0
            minute = mean(u for t, u in gpu.utils if t >= now - 60)
            label = f" {index}: {'N/A' if minute is None else f'{minute:3.0f}%'} "
            chart = sparkline(values, width - len(label), 1, 100.0)
            style = "red" if minute is not None and minute < 50 else "cyan"
            text.append(label, style="bold")
            text.append(chart.rows[0] + "\n", style=style)
        return text
