"""The trainer's stdout/stderr tail, toggled with `l`: wrapped (a traceback's last line is the one that
matters, and it is long) and scrollable, each line made inert (loratui.text) before it is written."""

from __future__ import annotations

from typing import Any

from textual.widgets import RichLog

from loratui.logic.runstate import RunState
from loratui.text import inert


class LogPane(RichLog):
    """Appends the trainer's new output lines; rewraps them when its width changes."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(max_lines=2000, wrap=True, min_width=20, highlight=False, markup=False,
                         **kwargs)  # type: ignore[arg-type]
        self.border_title = "trainer output"
        self._shown = 0
        self._state: RunState | None = None
        self._width = 0

    def show(self, state: RunState, total_lines: int) -> None:
        """Write lines that arrived since the last call (`total_lines` counts every line ever seen)."""
        self._state = state
        new = total_lines - self._shown
        if new <= 0:
            return
        tail = list(state.output_tail)[-min(new, len(state.output_tail)):]
        width = self.scrollable_content_region.width or None  # else the console's width (80) wraps
        for line in tail:
            self.write(inert(line, newlines=False), width=width)
        self._shown = total_lines

    def on_resize(self, event: Any) -> None:
        """Lines are wrapped when written: written at another width, write them again."""
        width = self.scrollable_content_region.width
        if width != self._width and self._state is not None:
            self._width = width
            state = self._state
            self.reset()
            self.show(state, state.output_lines)

    def reset(self) -> None:
        """Forget what was shown (a replay seek rebuilds everything)."""
        self.clear()
        self._shown = 0
