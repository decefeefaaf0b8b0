"""The status bar: run, state, progress, epoch, tokens/s, ETA, elapsed; and, on a third line while it
applies, why the run is paused (a SIGSTOP pause keeps its GPU memory: the user must see that where the
state is shown, not only in the output pane)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from loratui import events
from loratui.logic import fmt
from loratui.logic.chart import bar
from loratui.logic.runstate import RunState
from loratui.text import inert

STATE_STYLES = {
    events.TRAINING: "bold green", events.PAUSED: "bold yellow", events.SUSPENDED: "bold yellow",
    events.FINISHED: "bold cyan", events.FAILED: "bold red", events.STOPPED: "bold magenta",
    events.STARTING: "bold blue", events.LOADING: "bold blue",
}


class StatusBar(Static):
    """Two lines: identity and state, then progress and rates; a third for the pause's reason (.-noted)."""

    DEFAULT_CSS = "StatusBar { height: 2; } StatusBar.-noted { height: 3; }"

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._last = Text()

    def show(self, state: RunState, extra: str = "", now: float | None = None) -> None:
        """Redraw from the state; `extra` is the replay position or a source note.

        `now` (live views only) keeps the elapsed time moving while no event arrives, as when paused
        on a machine without a GPU to sample.
        """
        width = max(20, self.size.width or 80)
        head = Text()  # names, device and notes come from the log: inert, never markup
        head.append(f" {inert(state.name or state.run_id or 'run', newlines=False)} ", style="bold reverse")
        head.append(f" {state.state.upper()} ", style=STATE_STYLES.get(state.state, "bold"))
        if state.phase:
            head.append(f" [{inert(state.phase, newlines=False)}] ", style="bold magenta")
        if state.job_id:  # a Slurm run: its job and node, as `ls` and the MCP tools name them
            head.append(f" job {state.job_id}" + (f" on {state.node}" if state.node else ""), style="bold")
        head.append(f" {inert(state.device or '', newlines=False)}", style="dim")
        if extra:
            head.append(f"  {inert(extra, newlines=False)}", style="italic yellow")
        line = Text()
        total = state.total_steps
        steps = f" step {state.step}/{total or '?'} "
        # A watched plain loop has no epochs: its steps all say 0, which read as a stuck counter.
        epoch = f"{state.epoch:.2f}" if state.epoch > 0 or state.step == 0 else "--"
        figures = (f" ep {epoch}  {state.rate_figure}  "
                   f"ETA {fmt.duration(state.eta_s)}  elapsed {fmt.duration(_elapsed(state, now))}")
        # the bar never takes what the figures need: 62 columns left for them cut "elapsed 5m53s" to "5m5…" at 80
        # columns once the steps ran to four digits and the ETA past 10 minutes (step 1965/4000, ETA 20m21s)
        bar_width = max(8, min(40, width - 62, width - len(steps) - len(figures)))
        line.append(steps)
        line.append(bar(state.step / total if total else 0.0, bar_width), style="green")
        line.append(figures)
        parts = [head, line]
        note = state.pause_note
        if note:
            parts.append(Text(f" {inert(note, newlines=False)}", style="bold yellow"))
        for part in parts:  # each line cut at the edge: a long note must not wrap over the step line
            part.truncate(width, overflow="ellipsis")
        text = Text("\n").join(parts)
        self.set_class(bool(note), "-noted")
        if text != self._last:
            self._last = text
            self.update(text)

    @property
    def text(self) -> str:
        """What the bar shows now, as plain text."""
        return self._last.plain


def _elapsed(state: RunState, now: float | None) -> float | None:
    if now is None or state.started is None or state.state in events.FINAL_STATES:
        return state.elapsed_s
    return max(now - state.started, state.elapsed_s or 0.0)
