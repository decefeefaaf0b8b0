"""The trainer's stdout/stderr tail, toggled with `l`."""

from __future__ import annotations

from textual.widgets import RichLog

from loratui.logic.runstate import RunState


class LogPane(RichLog):
    """Appends the trainer's new output lines."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(max_lines=2000, wrap=False, highlight=False, markup=False, **kwargs)  # type: ignore[arg-type]
        self.border_title = "trainer output"
        self._shown = 0

    def show(self, state: RunState, total_lines: int) -> None:
        """Write lines that arrived since the last call (`total_lines` counts every line ever seen)."""
        new = total_lines - self._shown
        if new <= 0:
            return
        tail = list(state.output_tail)[-min(new, len(state.output_tail)):]
        for line in tail:
            self.write(line)
        self._shown = total_lines

    def reset(self) -> None:
        """Forget what was shown (a replay seek rebuilds everything)."""
        self.clear()
        self._shown = 0
