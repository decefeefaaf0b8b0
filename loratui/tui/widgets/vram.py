"""The VRAM pane: device used over time (window maxima), the warning line, torch's figures beside it."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from loratui import events, units
from loratui.logic.advisor.advice import line_for, over_line
from loratui.logic.advisor.watches import rank_imbalance
from loratui.logic.chart import column_spans, intervals, marked_columns, sparkline
from loratui.logic.runstate import RunState
from loratui.text import inert
from loratui.units import GIB

PHASES = frozenset({"eval", "save"})
"""Phases marked on the chart: memory steps up there (seed guide 4.6)."""


class VramPane(Widget):
    """Sparkline of device-used maxima with the warning line; turns to a warning style above it."""

    DEFAULT_CSS = "VramPane { height: 9; }"

    def __init__(self, warn_gib: float = 30.0, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.warn_gib = warn_gib
        self.border_title = "VRAM"
        self._state: RunState | None = None
        self._key: tuple[object, ...] = ()
        self.compare: RunState | None = None
        """A second run drawn under this one (replay A B), on the same scale."""

    def show(self, state: RunState) -> None:
        """Take the run's state; redraw only when what this pane shows has changed."""
        gpu = _primary(state)
        key = (len(gpu.used) if gpu else 0, gpu.used.xs[-1] if gpu and gpu.used.xs else None,
               state.step, state.gpu_available, state.device, state.estimate is not None, len(state.phases),
               self.size)
        self._state = state
        if key == self._key:
            return
        self._key = key
        if state.warn_gb is not None:
            self.warn_gib = state.warn_gb  # the run's own line, even on a replay without its recipe
        warn = int(self.warn_gib * GIB)
        over = gpu is not None and over_line(gpu.used_peak, warn, gpu.total)
        near = gpu is not None and gpu.used_last > 0.9 * line_for(warn, gpu.total)
        self.set_class(over or near, "-warning")
        self.set_class(gpu is None, "-nogpu")
        self.set_class(gpu_none(state), "-cpu")
        self._titles(state)
        self.refresh()

    def _titles(self, state: RunState) -> None:
        gpu = _primary(state)
        if gpu is None:
            self.border_subtitle = "N/A"
            return
        headroom = gpu.total - gpu.used_peak
        self.border_title = Text(f"VRAM {inert(gpu.name, newlines=False)}".strip())  # a Text: never markup
        self.border_subtitle = (f"now {units.gib(gpu.used_last)} · peak {units.gib(gpu.used_peak)} · "
                                f"total {units.gib(gpu.total)} GiB · headroom {units.gib(headroom)}"
                                + (" · blue: eval/save" if any(p[1] in PHASES for p in state.phases) else ""))

    def render(self) -> Text:
        state = self._state
        width, height = self.content_size.width, self.content_size.height
        if state is None or width < 4 or height < 1:
            return Text("")
        gpu = _primary(state)
        if gpu_none(state):
            return _none_line(state, width)
        if gpu is None:
            reason = inert(state.gpu_reason, newlines=False) or "waiting for the first sample"
            # the pane is two lines high without a GPU (app.tcss -nogpu): torch and estimate share the second
            estimate = _estimate_line(state)
            sep = " · " if estimate else ""
            return Text(f"device memory: N/A ({reason})\n" + _torch_line(state) + sep + estimate, style="dim")
        chart_height = max(1, height - 2)
        other = _primary(self.compare) if self.compare is not None else None
        peak = max(gpu.used_peak, other.used_peak if other else 0)
        top = max(self.warn_gib * 1.25, peak / GIB * 1.1, 1.0) * GIB
        top = min(top, gpu.total or top)
        text = Text()
        if other is None:
            phase_cols = marked_columns(column_spans(gpu.used.xs, width),
                                        intervals(state.phases, PHASES, state.last_t or 0.0), pad=0.1)
            self._chart(text, gpu.used.ys, width, chart_height, top, marked=phase_cols)
        else:  # compare: A above B, same scale, each labelled at its left edge
            half = max(1, chart_height // 2)
            self._chart(text, gpu.used.ys, width, half, top, label="A")
            self._chart(text, other.used.ys, width, max(1, chart_height - half), top, label="B")
        text.append(_torch_line(state)[:width] + "\n", style="bold")
        text.append(_estimate_line(state)[:width], style="dim")
        return text


    def _chart(self, text: Text, values: list[float], width: int, height: int, top: float,
               label: str = "", marked: list[bool] | None = None) -> None:
        """Append one sparkline with the warning line to `text`; `marked` columns (eval/save) in blue."""
        chart = sparkline(values, width, height, top, self.warn_gib * GIB)
        marked = marked or [False] * width
        for r, row in enumerate(chart.rows):
            line = Text()
            for c, ch in enumerate(row):
                bar = "red" if chart.over[c] else ("dodger_blue1" if marked[c] else "green")
                style = "bold yellow" if ch in "─━" else bar
                line.append(ch, style=style)
            tag = f" {self.warn_gib:g} GiB" if r == chart.line_row else ""
            if tag:
                line.right_crop(len(tag))
                line.append(tag, style="yellow")
            if label and r == 0:
                line = Text(label, style="bold reverse") + line[len(label):]
            text.append(line)
            text.append("\n")


def gpu_none(state: RunState) -> bool:
    """No GPU to show: none sampled, the sampler found none, and the trainer reports no torch device memory (a
    CPU run). The VRAM and util panes then fold into one line (app.tcss -cpu): at 80x24 they took 7 rows to say
    N/A, rows the loss chart needs. So they do for a record that has ended with no word of a GPU at all (an
    import of a trainer_state.json or a stdout log): "waiting for the first sample" would wait for ever."""
    if state.gpus or state.torch_allocated is not None:
        return False
    if state.gpu_available is not None:
        return not state.gpu_available
    return state.state in events.FINAL_STATES or any(n.key == IMPORTED for n in state.notices)


IMPORTED = "import"
"""The key of the notice an imported record opens with (sources/importers.py): it holds no GPU reading."""


def _none_line(state: RunState, width: int) -> Text:
    """The folded panes' one line: that there is no GPU and why, then the estimate. On a CPU run the NVML
    reason comes last and only whole where it fits: cut at 80 columns it read "... · NVML cannot", an alarm."""
    reason = inert(state.gpu_reason, newlines=False)
    if state.device == "cpu":
        line = " · ".join(p for p in ["GPU: none (CPU run)", _estimate_line(state)] if p)
        # a run that trained on the CPU needs no NVML: "pip install 'loratui[gpu]'" is no step for it (its replay
        # showed the recording box's missing nvidia-ml-py as one)
        if reason and "pip install" not in reason and len(line) + 3 + len(reason) <= width:
            line += " · " + reason
    elif state.gpu_available is None:  # the record never said: an import, a log from elsewhere
        line = " · ".join(p for p in ["GPU: no readings in this record", _estimate_line(state)] if p)
    else:
        # the reason after a dot: in parentheses, NVML's own "(pip install 'loratui[gpu]')" nested in two
        said = f"GPU: none · {reason}" if reason else "GPU: none found"
        line = " · ".join(p for p in [said, _estimate_line(state)] if p)
    return Text(line, style="dim", no_wrap=True, overflow="ellipsis")


def _primary(state: RunState):  # type: ignore[no-untyped-def]
    """The GPU that holds the most memory (the run's GPU on a shared box)."""
    return max(state.gpus.values(), key=lambda g: g.used_peak, default=None)


def _torch_line(state: RunState) -> str:
    if state.torch_allocated is None:
        return "torch: N/A (CPU run)" if state.device == "cpu" else "torch: --"
    # A watched script's peak counters are its own, never reset by loratui: a running max, not a step's.
    peak = "peak so far" if state.command else "step peak"
    line = (f"torch alloc {units.gib(state.torch_allocated)} · reserved {units.gib(state.torch_reserved)} · "
            f"{peak} {units.gib(state.step_peak_allocated)}/{units.gib(state.step_peak_reserved)} GiB")
    if len(state.rank_peak_reserved) > 1:
        # One rank far above the others usually means a wrong device placement (set_device).
        line += " · ranks " + " ".join(f"{r}:{units.gib(v)}" for r, v in sorted(state.rank_peak_reserved.items()))
        if rank_imbalance(state.rank_peak_reserved):
            line += " ⚠ rank imbalance"
    return line


def _estimate_line(state: RunState) -> str:
    est = state.estimate
    if est is None:
        return ""
    if state.device == "cpu":  # no CUDA context or slack: `loratui estimate` gives a GPU's figure, and this one
        return f"estimate {units.size(est.peak_device_gib)} on CPU (no CUDA context)"
    if est.peak_device_gib < 1:  # the tiny demo's 36 MiB read "estimate 0.0 GiB device · 0.0 reserved"
        line = f"estimate {units.mib(est.peak_device_gib)} device · {units.mib(est.peak_reserved_gib)} reserved"
    else:
        line = f"estimate {est.peak_device_gib:.1f} GiB device · {est.peak_reserved_gib:.1f} reserved"
    if state.step >= state.start_step + 3 and state.device_used_peak and est.peak_device_gib > 0:
        measured = state.device_used_peak / GIB
        error = (measured - est.peak_device_gib) / est.peak_device_gib
        line += f" · measured {units.mib(measured) if measured < 1 else f'{measured:.1f}'} ({error:+.0%})"
    return line
