"""The status bar: run, state, progress, epoch, tokens/s, ETA, elapsed."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from loratui import events
from loratui.logic import fmt
from loratui.logic.chart import bar
from loratui.logic.runstate import RunState

STATE_STYLES = {
    events.TRAINING: "bold green", events.PAUSED: "bold yellow", events.SUSPENDED: "bold yellow",
    events.FINISHED: "bold cyan", events.FAILED: "bold red", events.STOPPED: "bold magenta",
    events.STARTING: "bold blue", events.LOADING: "bold blue",
}


class StatusBar(Static):
    """Two lines: identity and state, then progress and rates."""

    DEFAULT_CSS = "StatusBar { height: 2; }"

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._last = Text()

    def show(self, state: RunState, extra: str = "", now: float | None = None) -> None:
        """Redraw from the state; `extra` is the replay position or a source note.

        `now` (live views only) keeps the elapsed time moving while no event arrives, as when paused
        on a machine without a GPU to sample.
        """
        width = max(20, self.size.width or 80)
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f" {state.name or state.run_id or 'run'} ", style="bold reverse")
        text.append(f" {state.state.upper()} ", style=STATE_STYLES.get(state.state, "bold"))
        if state.phase:
            text.append(f" [{state.phase}] ", style="bold magenta")
        text.append(f" {state.device or ''}", style="dim")
        if extra:
            text.append(f"  {extra}", style="italic yellow")
        text.append("\n")
        total = state.max_steps
        bar_width = max(8, min(40, width - 62))
        text.append(f" step {state.step}/{total or '?'} ")
        text.append(bar(state.step / total if total else 0.0, bar_width), style="green")
        text.append(f" ep {state.epoch:.2f}  tok/s {fmt.rate(state.tokens_per_s)}  "
                    f"ETA {fmt.duration(state.eta_s)}  elapsed {fmt.duration(_elapsed(state, now))}")
        if text != self._last:
            self._last = text
            self.update(text)


def _elapsed(state: RunState, now: float | None) -> float | None:
    if now is None or state.started is None or state.state in events.FINAL_STATES:
        return state.elapsed_s
    return max(now - state.started, state.elapsed_s or 0.0)
