"""What a run looks like after a sequence of events: the one reducer behind every view.

Live, attach, replay, `loratui ls`, the headless progress line and the advisor all fold the same events
through `RunState.feed`, so they agree. No clock reads: time comes from the events themselves.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loratui import events
from loratui.logic import clock, fmt, series
from loratui.logic.series import PeakSeries
from loratui.text import inert
from loratui.units import GIB  # noqa: F401  (re-exported for the panes)


TIMES_ASSUMED = "times_assumed"
"""The key of the notice an imported record without times opens with (sources/importers.py)."""

@dataclass
class GpuView:
    """One GPU's latest window and history."""

    index: int
    name: str = ""
    total: int = 0
    used_last: int = 0
    used_peak: int = 0
    util: int | None = None
    procs: dict[str, int] = field(default_factory=dict)
    run_pids: list[int] = field(default_factory=list)
    used: PeakSeries = field(default_factory=PeakSeries)
    utils: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=3000))


@dataclass
class RunState:
    """The folded state of one run."""

    run_id: str = ""
    name: str = ""
    state: str = events.STARTING
    state_reason: str = ""
    started: float | None = None
    last_t: float | None = None
    train_start_t: float | None = None
    warn_gb: float | None = None
    """The warning line the run had (its header), when the log says."""
    max_steps: int = 0
    start_step: int = 0
    step: int = 0
    epoch: float = 0.0
    device: str = ""
    params_trainable: int = 0
    params_total: int = 0
    batch_size: int = 1
    grad_accum: int = 1
    max_length: int = 0
    gpu_available: bool | None = None
    gpu_reason: str = ""
    gpus: dict[int, GpuView] = field(default_factory=dict)
    step_times: deque[float] = field(default_factory=lambda: deque(maxlen=20))
    step_numbers: deque[int] = field(default_factory=lambda: deque(maxlen=20))  # rank 0's, beside step_times
    step_rank_tokens: dict[int, dict[int, int]] = field(default_factory=dict)
    """Recent steps' tokens, each rank's (step -> rank -> tokens): a multi-process run's throughput is every rank's
    tokens, not rank 0's share. Keyed by rank, so a step run again after a restart replaces its count."""
    tokens_seen: int = 0
    tokens_stepped: int = 0
    """Every rank's tokens over every step recorded (a step trained again after a restart counts again: it was)."""
    stepped_s: float = 0.0
    """Rank 0's step times over every step recorded: with `tokens_stepped`, the run's own throughput."""
    rank_steps: dict[int, int] = field(default_factory=dict)  # last step each rank reported
    rank_peak_reserved: dict[int, int] = field(default_factory=dict)  # per-rank torch peak (bytes)
    torch_allocated: int | None = None
    torch_reserved: int | None = None
    step_peak_allocated: int | None = None
    step_peak_reserved: int | None = None
    peak_reserved: int = 0
    peak_allocated: int = 0
    loss: list[tuple[int, float]] = field(default_factory=list)
    eval_loss: list[tuple[int, float]] = field(default_factory=list)
    lr: list[tuple[int, float]] = field(default_factory=list)
    grad_norm: list[tuple[int, float]] = field(default_factory=list)
    nan_steps: list[int] = field(default_factory=list)
    phases: list[tuple[float, str, str, int]] = field(default_factory=list)  # (t, name, edge, step)
    phase: str = ""
    checkpoints: list[tuple[int, str]] = field(default_factory=list)
    notices: list[events.Notice] = field(default_factory=list)
    output_tail: deque[str] = field(default_factory=lambda: deque(maxlen=500))
    output_lines: int = 0  # every output line ever seen (the tail keeps the last 500)
    end: events.End | None = None
    estimate: events.Estimate | None = None
    sampler: events.SamplerStats | None = None
    controls: frozenset[str] | None = None  # the control commands the run obeys; None: all of them
    pause_mode: str = ""  # "signal": pause is SIGSTOP (its memory, GPU memory too, stays held)
    pause_source: str = ""  # who asked for the last pause (the control event's source: tui, cli, agent)
    command: list[str] = field(default_factory=list)  # the watched command of a `loratui run --` run
    job_id: str = ""  # the Slurm job the run started in ('' outside Slurm; events.Header.job_id)
    node: str = ""  # the host that owns the run (its header's)
    n_events: int = 0
    covered_s: float = 0.0
    """The run's duration by its events (logic/clock.py): a wall clock set back (NTP, a VM resumed) makes it
    no shorter, where `last_t - started` went negative."""
    newest_t: float | None = None
    waited_s: float = 0.0
    """Time spent suspended (no process: a Slurm job requeued and waiting in the queue, a suspend waiting for
    resume), by `covered_s`, over the suspensions that ended; `waiting_s` adds the one going on."""
    suspended_at: float | None = None  # covered_s when the run was last suspended, while it is
    paused_s: float = 0.0
    """Time spent paused (`p`, `loratui pause`: the process held, at a step boundary or by SIGSTOP, until resumed), by
    `covered_s`, over the pauses that ended; `pausing_s` adds the one going on. No training happens in it: told
    apart from the run time, as a suspension's wait is."""
    paused_at: float | None = None  # covered_s when the run was last paused, while it is

    def feed(self, event: events.AnyEvent) -> None:
        """Fold one event in."""
        self.n_events += 1
        self.covered_s, self.newest_t = clock.advance(self.covered_s, self.newest_t, event.t)
        self.last_t = event.t
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def feed_all(self, found: list[events.AnyEvent]) -> "RunState":
        """Fold many events; returns self."""
        for event in found:
            self.feed(event)
        return self

    # -- derived figures --------------------------------------------------------------------------

    @property
    def last_loss(self) -> float | None:
        return self.loss[-1][1] if self.loss else None

    @property
    def pause_note(self) -> str:
        """Why the run is paused, as its log says (a SIGSTOP pause: its memory stays held), or ''.

        A pause at a step boundary records no reason; a pause by signal does, and the viewers show it
        beside the state, live, attached and in replay alike, because it is folded from the log."""
        return self.state_reason if self.state == events.PAUSED else ""

    @property
    def pause_why(self) -> str:
        """That the run is paused, why and who asked, or '': for a reader with no PAUSED badge to stand beside
        (the agent interface). A pause at a step boundary records no reason of its own: its where is said."""
        if self.state != events.PAUSED:
            return ""
        why = self.state_reason or f"paused at a step boundary after step {self.step}"
        source = self.pause_source
        return why + (f", asked {_ASKED.get(source, f'by {source}')}" if source else "")

    @property
    def stop_by_signal(self) -> bool:
        """A stop reaches this run as SIGTERM to its command's process group, at once: a watched command with
        no Trainer hooked in it (a plain loop, `python -I`), or one whose Trainer has not begun (its header's
        controls are stop alone until then). A recipe's trainer and a hooked Trainer stop at the next step
        boundary, through the command file (supervisor/owner.py `_enforce_stop`, command.py `stop_signals`)."""
        return bool(self.command) and (self.pause_mode == "signal" or self.controls == frozenset({"stop"}))

    @property
    def total_steps(self) -> int:
        """The run's steps in all, 0 while unknown (a watched loop printing no total). A finished run took
        all its steps, so its total is known at the end: its bar is full rather than empty."""
        if self.max_steps <= 0 and self.state == events.FINISHED:
            return self.step
        return self.max_steps

    @property
    def times_assumed(self) -> bool:
        """The record holds no times of its own (an import with neither train_runtime nor elapsed times): its
        steps were drawn a second apart, so no duration, pace or ETA may be read from them."""
        return any(n.key == TIMES_ASSUMED for n in self.notices)

    @property
    def tokens_per_s(self) -> float | None:
        """Tokens per second over the recent steps, of every rank (the ranks step together: rank 0's times)."""
        total_time = sum(self.step_times)
        tokens = sum(sum(self.step_rank_tokens.get(step, {}).values()) for step in self.step_numbers)
        return tokens / total_time if total_time > 0 and tokens else None

    @property
    def run_tokens_per_s(self) -> float | None:
        """The run's own throughput: every token stepped over the time its steps took (None without both)."""
        if self.times_assumed or self.stepped_s <= 0 or not self.tokens_stepped:
            return None
        return self.tokens_stepped / self.stepped_s

    @property
    def rate_figure(self) -> str:
        """Throughput as the views show it: the recent steps' while the run goes; an ended run's own average, said
        to be one (`avg tok/s`): its last 20 steps' rate, shown as if live, was no figure of the run (a final
        evaluation or save in them pulled it down)."""
        if self.state in events.FINAL_STATES:
            return f"avg tok/s {fmt.rate(self.run_tokens_per_s)}"
        return f"tok/s {fmt.rate(self.tokens_per_s)}"

    @property
    def seconds_per_step(self) -> float | None:
        if self.times_assumed:
            return None
        times = list(self.step_times)[1:] or list(self.step_times)
        return sum(times) / len(times) if times else None

    @property
    def eta_s(self) -> float | None:
        per = self.seconds_per_step
        # No ETA while held: a paused or suspended run ends whenever someone resumes it, not in N minutes.
        held = self.state in (events.PAUSED, events.SUSPENDED)
        if per is None or self.max_steps <= 0 or self.state in events.FINAL_STATES or held:
            return None
        return max(0, self.max_steps - self.step) * per

    @property
    def elapsed_s(self) -> float | None:
        if self.started is None or self.last_t is None or self.times_assumed:
            return None
        return self.covered_s

    @property
    def waiting_s(self) -> float | None:
        """The part of `elapsed_s` the run spent suspended (see `waited_s`); None where `elapsed_s` is."""
        return self._held(self.waited_s, self.suspended_at)

    @property
    def pausing_s(self) -> float | None:
        """The part of `elapsed_s` the run spent paused (see `paused_s`); None where `elapsed_s` is."""
        return self._held(self.paused_s, self.paused_at)

    def _held(self, done: float, since: float | None) -> float | None:
        """`done` seconds held before, plus the hold going on since `since` (None: none is); None where `elapsed_s`
        is."""
        if self.elapsed_s is None:
            return None
        return done + (max(0.0, self.covered_s - since) if since is not None else 0.0)

    @property
    def run_s(self) -> float | None:
        """The run's time less its pauses and suspensions: the time it was running (None where `elapsed_s` is)."""
        if self.elapsed_s is None:
            return None
        return max(0.0, self.elapsed_s - (self.waiting_s or 0.0) - (self.pausing_s or 0.0))

    @property
    def device_used_peak(self) -> int:
        return max((g.used_peak for g in self.gpus.values()), default=0)

    @property
    def device_used_now(self) -> int:
        return max((g.used_last for g in self.gpus.values()), default=0)


def _header(s: RunState, e: events.Header) -> None:
    # Names and states come from a file anyone may have written: inert here, so no view can show them raw.
    s.run_id, s.name, s.started, s.warn_gb = inert(e.run_id, False), inert(e.name, False), e.t, e.warn_gb
    s.command = list(e.command)
    s.job_id, s.node = inert(e.job_id, False), inert(e.node, False)
    if e.controls:
        s.controls = frozenset(e.controls)


def _state(s: RunState, e: events.State) -> None:
    s.state, s.state_reason = inert(e.state, False), inert(e.reason, False)
    if e.state == events.SUSPENDED and s.suspended_at is None:
        s.suspended_at = s.covered_s
    elif e.state != events.SUSPENDED:
        _wake(s)
    if e.state == events.PAUSED and s.paused_at is None:
        s.paused_at = s.covered_s
    elif e.state != events.PAUSED:
        _unpause(s)
    if e.state == events.STARTING and e.step is not None and e.step >= 0:
        s.step = e.step  # a new attempt (a guard's restart) begins at its checkpoint's step, not where the last ended


def _wake(s: RunState) -> None:
    """A suspension ends (the run starts again, or ends): its time goes to `waited_s`."""
    if s.suspended_at is not None:
        s.waited_s += max(0.0, s.covered_s - s.suspended_at)
        s.suspended_at = None


def _unpause(s: RunState) -> None:
    """A pause ends (resumed, suspended, or the run ends): its time goes to `paused_s`."""
    if s.paused_at is not None:
        s.paused_s += max(0.0, s.covered_s - s.paused_at)
        s.paused_at = None


def _train_begin(s: RunState, e: events.TrainBegin) -> None:
    s.max_steps, s.start_step, s.device = e.max_steps, e.start_step, e.device
    s.params_total, s.params_trainable = e.params_total, e.params_trainable
    s.batch_size, s.grad_accum, s.max_length = e.batch_size, e.grad_accum, e.max_length
    s.step = max(s.step, e.start_step)
    if e.controls:
        s.controls, s.pause_mode = frozenset(e.controls), e.pause_mode
    if s.train_start_t is None:
        s.train_start_t = e.t


_RANK_TOKEN_STEPS = 64
"""Steps whose per-rank tokens are kept: the 20 of the throughput window, and ranks a little behind rank 0."""


def _step(s: RunState, e: events.Step) -> None:
    s.rank_steps[e.rank] = e.step
    s.step_rank_tokens.setdefault(e.step, {})[e.rank] = e.tokens
    s.tokens_stepped += max(0, e.tokens)
    if len(s.step_rank_tokens) > _RANK_TOKEN_STEPS:  # the oldest steps (insertion order: a restart's too)
        for old in list(s.step_rank_tokens)[:len(s.step_rank_tokens) - _RANK_TOKEN_STEPS]:
            del s.step_rank_tokens[old]
    if e.peak_reserved is not None:
        s.rank_peak_reserved[e.rank] = max(s.rank_peak_reserved.get(e.rank, 0), e.peak_reserved)
    if e.rank != 0:
        return  # rank 0 speaks for the run's progress; other ranks add their memory figures
    s.step, s.epoch, s.tokens_seen = e.step, e.epoch, e.tokens_seen
    s.step_times.append(e.step_time)
    s.stepped_s += max(0.0, e.step_time)
    s.step_numbers.append(e.step)
    s.torch_allocated, s.torch_reserved = e.torch_allocated, e.torch_reserved
    s.step_peak_allocated, s.step_peak_reserved = e.peak_allocated, e.peak_reserved
    s.peak_reserved = max(s.peak_reserved, e.peak_reserved or 0)
    s.peak_allocated = max(s.peak_allocated, e.peak_allocated or 0)


def _log(s: RunState, e: events.Log) -> None:
    values = {k: events.num_in(v) for k, v in e.values.items()}
    loss = series.logged_loss(values)
    if loss is not None and not events.is_train_summary(values):
        s.loss.append((e.step, loss))
        if not math.isfinite(loss):
            s.nan_steps.append(e.step)
    if values.get("eval_loss") is not None:
        s.eval_loss.append((e.step, values["eval_loss"]))  # type: ignore[arg-type]
    if values.get("learning_rate") is not None:
        s.lr.append((e.step, values["learning_rate"]))  # type: ignore[arg-type]
    grad = values.get("grad_norm")
    if grad is not None:
        s.grad_norm.append((e.step, grad))
        if not math.isfinite(grad) and (not s.nan_steps or s.nan_steps[-1] != e.step):
            s.nan_steps.append(e.step)


def _phase(s: RunState, e: events.Phase) -> None:
    s.phases.append((e.t, e.name, e.edge, e.step))
    s.phase = e.name if e.edge == "begin" and e.name != "train" else ""


def _gpu_info(s: RunState, e: events.GpuInfo) -> None:
    s.gpu_available, s.gpu_reason = e.available, e.reason
    for index, name, total in zip(e.indices, e.names, e.totals):
        s.gpus.setdefault(index, GpuView(index)).__dict__.update(name=name, total=total)


def _sample(s: RunState, e: events.Sample) -> None:
    gpu = s.gpus.get(e.gpu)
    if gpu is None:
        gpu = s.gpus[e.gpu] = GpuView(e.gpu, total=e.total)
    gpu.used_last, gpu.total, gpu.util = e.used_last, e.total, e.util
    gpu.used_peak = max(gpu.used_peak, e.used_max)
    gpu.procs, gpu.run_pids = e.procs, e.run_pids
    gpu.used.add(e.t, float(e.used_max))
    if e.util is not None:
        gpu.utils.append((e.t, float(e.util)))


def _output(s: RunState, e: events.Output) -> None:
    s.output_tail.extend(e.lines)
    s.output_lines += len(e.lines)


def _notice(s: RunState, e: events.Notice) -> None:
    s.notices.append(e)


def _checkpoint(s: RunState, e: events.Checkpoint) -> None:
    s.checkpoints.append((e.step, e.path))


def _end(s: RunState, e: events.End) -> None:
    s.end, s.state = e, inert(e.state, False)
    _wake(s)  # a suspended run stopped: it waited until then
    _unpause(s)  # so did a paused one


def _estimate(s: RunState, e: events.Estimate) -> None:
    s.estimate = e


def _sampler(s: RunState, e: events.SamplerStats) -> None:
    s.sampler = e


def _control(s: RunState, e: events.Control) -> None:
    if e.command == "pause":
        s.pause_source = inert(e.source, False)


_ASKED = {"tui": "from the app (p)", "cli": "from the shell (loratui pause)", "agent": "by an agent (loratui mcp)"}
"""Who a pause's source names (`control.Request.source`), in words."""


_HANDLERS: dict[type, Callable[[RunState, Any], None]] = {
    events.Header: _header, events.State: _state, events.TrainBegin: _train_begin, events.Step: _step,
    events.Log: _log, events.Phase: _phase, events.GpuInfo: _gpu_info, events.Sample: _sample,
    events.Output: _output, events.Notice: _notice, events.Checkpoint: _checkpoint, events.End: _end,
    events.Estimate: _estimate, events.SamplerStats: _sampler, events.Control: _control,
}
