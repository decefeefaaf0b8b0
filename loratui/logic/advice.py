"""The troubleshooting advisor: folds a run's events and its recipe into concrete, evidenced advice.

`Advisor.feed` is cheap and deterministic (bounded deques, no clock reads): the same event sequence gives
the same `items()` live, on attach and in replay. Detectors record *findings* (the numbers and the step
where they were seen) as events arrive; `items()` turns findings into `Advice`, with moves computed from
the recipe alone, so a finding means the same thing whenever it is shown. Missing or contradictory data
gives no advice rather than a guess.

The VRAM warning line `[monitor] warn_gb` is read as GiB (2**30 bytes), the unit nvidia-smi, torch and
the VRAM pane show: a "32 GB" card reports 31.7 GiB, so the default 30 leaves about 1.7 GiB of headroom.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

from loratui import events
from loratui.logic import oom
from loratui.recipe import MonitorSection, Recipe

GIB, MIB = oom.GIB, oom.MIB
ERROR, WARNING, INFO = "error", "warning", "info"
IDS = (
    "oom_full", "oom_fragmentation", "oom_other_process", "oom_at_eval", "oom_at_save", "cuda_error",
    "bnb_setup", "flash_attn_unavailable", "nan_loss", "loss_diverging", "vram_near_limit", "memory_leak",
    "loss_flat", "data_starved",
)
"""The fixed vocabulary of advice ids, in the order of importance within one severity."""
_SEVERITY_RANK = {ERROR: 0, WARNING: 1, INFO: 2}


@dataclass(frozen=True)
class Advice:
    """One piece of advice: what is wrong, the numbers that show it, and the recipe change that helps."""

    id: str
    severity: str
    title: str
    evidence: list[str]
    change: dict[str, Any]
    """Dotted recipe key (or `env.NAME`) -> new value; empty when no recipe key fixes it."""
    step: int
    """The optimiser step at which it was detected (the last completed step)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape `loratui doctor --json` prints."""
        return asdict(self)


@dataclass(frozen=True)
class Finding:
    """What a detector saw: its id, the step, and the facts the advice is built from."""

    id: str
    step: int
    facts: dict[str, Any]


def warn_line_bytes(recipe: Recipe | None) -> int:
    """The VRAM warning line in bytes (`warn_gb` read as GiB)."""
    monitor = recipe.monitor if recipe is not None else MonitorSection()
    return int(monitor.warn_gb * GIB)


# -- the context every detector shares -----------------------------------------------------------


@dataclass
class Context:
    """Where the run is: step, open phase, run state, and which GPUs are this run's."""

    step: int = 0
    phase: str = ""  # "eval" or "save" while one is open
    state: str = ""
    began: bool = False
    training: bool = False
    ended: bool = False
    max_steps: int = 0
    gpu_names: dict[int, str] = field(default_factory=dict)
    ours: set[int] = field(default_factory=set)
    last_sample: dict[int, events.Sample] = field(default_factory=dict)
    trace_hint: str = ""

    def is_ours(self, gpu: int) -> bool:
        """A GPU counts when the run's processes were seen on it, or when no GPU ever showed them."""
        return gpu in self.ours or not self.ours

    def steady_training(self) -> bool:
        """Training steps are happening now: not paused, not evaluating or saving, not over."""
        return self.training and not self.ended and not self.phase and self.state == events.TRAINING

    def other_pids(self) -> list[tuple[int, int]]:
        """(pid, bytes) of processes outside this run holding >= 256 MiB on this run's GPUs."""
        found = []
        for gpu in sorted(self.ours):
            sample = self.last_sample.get(gpu)
            if sample is None or not sample.run_pids:
                continue
            mine = set(sample.run_pids)
            found += [(int(p), b) for p, b in sample.procs.items()
                      if p.isdigit() and int(p) not in mine and b >= 256 * MIB]
        return sorted(found)


# -- detectors over telemetry ---------------------------------------------------------------------


class VramWatch:
    """Device memory over the warning line in several windows within 10 s; on only while that holds."""

    SPAN_S, MIN_WINDOWS, MIN_SPREAD_S = 10.0, 3, 2.0

    def __init__(self, line: int) -> None:
        self.line = line
        self.over: dict[int, deque[float]] = {}
        self.peak: dict[int, int] = {}
        self.current: Finding | None = None
        self.seen_training = False

    def sample(self, ctx: Context, e: events.Sample) -> bool:
        """Fold one steady-training window in; True when the advice may have changed."""
        first = not self.seen_training
        self.seen_training = True  # measured windows now win over a pre-flight projection
        line = _line_for(self.line, e.total)
        over = self.over.setdefault(e.gpu, deque(maxlen=4096))
        if e.used_max >= line:
            over.append(e.t)
            self.peak[e.gpu] = max(self.peak.get(e.gpu, 0), e.used_max)
        while over and over[0] < e.t - self.SPAN_S:
            over.popleft()
        hot = len(over) >= self.MIN_WINDOWS and over[-1] - over[0] >= self.MIN_SPREAD_S
        before = self.current
        mine = before is not None and before.facts["gpu"] == e.gpu
        if hot and (before is None or mine and self.peak[e.gpu] > before.facts["peak"]):
            self.current = Finding("vram_near_limit", before.step if before else ctx.step, {
                "gpu": e.gpu, "peak": self.peak[e.gpu], "line": line, "warn": self.line, "total": e.total,
                "windows": len(over), "name": ctx.gpu_names.get(e.gpu, "")})
        elif not over:
            self.peak.pop(e.gpu, None)
            if mine:
                self.current = None
        return first or self.current is not before


def _line_for(warn: int, total: int) -> int:
    """The line a window is judged against: the warning line, or 95% of a card smaller than it."""
    return min(warn, int(total * 0.95)) if total > 0 else warn


class StarveWatch:
    """GPU utilisation under 50% over 30 s of steady training with steps, and time lost between steps."""

    SPAN_S, ON_BELOW, OFF_ABOVE, MIN_GAP = 30.0, 50.0, 60.0, 0.25

    def __init__(self) -> None:
        self.utils: deque[tuple[float, int]] = deque()
        self.steps: deque[tuple[float, float, float]] = deque()  # (t, interval, step_time)
        self.current: Finding | None = None
        self.reset()

    def reset(self) -> None:
        """Start over after a pause, an eval or a save: those windows say nothing about data loading."""
        self.utils.clear()
        self.steps.clear()
        self.util_sum, self.interval_sum, self.busy_sum = 0, 0.0, 0.0
        self.last_step_t: float | None = None

    def step(self, e: events.Step) -> None:
        """Record the time between step ends and the part of it the step itself took."""
        if self.last_step_t is not None and e.t > self.last_step_t:
            interval, busy = e.t - self.last_step_t, min(max(0.0, e.step_time), e.t - self.last_step_t)
            self.steps.append((e.t, interval, busy))
            self.interval_sum += interval
            self.busy_sum += busy
        self.last_step_t = e.t
        while self.steps and (self.steps[0][0] < e.t - self.SPAN_S or len(self.steps) > 20000):
            _, interval, busy = self.steps.popleft()
            self.interval_sum -= interval
            self.busy_sum -= busy

    def sample(self, ctx: Context, e: events.Sample) -> bool:
        """Fold one utilisation reading in; True when the finding changed."""
        if e.util is None or not 0 <= e.util <= 100:
            return False
        self.utils.append((e.t, e.util))
        self.util_sum += e.util
        while self.utils[0][0] < e.t - self.SPAN_S or len(self.utils) > 20000:
            self.util_sum -= self.utils.popleft()[1]
        return self._judge(ctx, e.t)

    def _judge(self, ctx: Context, now: float) -> bool:
        span = now - self.utils[0][0]
        if span < self.SPAN_S - 1.0 or len(self.utils) < 10 or len(self.steps) < 3:
            return False
        mean = self.util_sum / len(self.utils)
        gap = 1.0 - self.busy_sum / self.interval_sum if self.interval_sum > 0 else 0.0
        before = self.current
        if mean < self.ON_BELOW and gap >= self.MIN_GAP and before is None:
            self.current = Finding("data_starved", ctx.step, {
                "util": mean, "span": span, "gap": gap, "steps": len(self.steps),
                "per_step": self.interval_sum / len(self.steps)})
        elif before is not None and (mean >= self.OFF_ABOVE or gap < self.MIN_GAP / 2):
            self.current = None
        return self.current is not before


class JumpWatch:
    """Eval or save phases that push device memory over the line well above the training peak."""

    def __init__(self, line: int) -> None:
        self.line = line
        self.train_peak = 0
        self.phase_peak = 0

    def sample(self, ctx: Context, e: events.Sample) -> Finding | None:
        """Fold one window in; a finding when an eval/save window crosses the line as a jump."""
        line = _line_for(self.line, e.total)
        if not ctx.phase:
            if ctx.steady_training():
                self.train_peak = max(self.train_peak, e.used_max)
            return None
        self.phase_peak = max(self.phase_peak, e.used_max)
        jump = self.phase_peak - self.train_peak
        if self.train_peak and self.phase_peak >= line and jump >= max(256 * MIB, e.total // 33):
            return Finding(f"oom_at_{ctx.phase}", ctx.step, {
                "pre": True, "train_peak": self.train_peak, "phase_peak": self.phase_peak, "line": line})
        return None


class LeakWatch:
    """torch_allocated at step end rising in most of 50 steps, smoothly rather than in one jump."""

    WINDOW, MIN_GROWTH, MIN_RISING, MAX_JUMP_SHARE = 50, 32 * MIB, 0.8, 0.3

    def __init__(self) -> None:
        self.values: deque[tuple[int, int]] = deque(maxlen=self.WINDOW)  # (step, allocated)
        self.diffs: deque[int] = deque(maxlen=self.WINDOW - 1)
        self.maxq: deque[tuple[int, int]] = deque()  # monotonic: (serial, diff), largest first
        self.rising = self.serial = 0

    def reset(self) -> None:
        """Forget the window (a resumed or restarted run)."""
        self.values.clear()
        self.diffs.clear()
        self.maxq.clear()
        self.rising = self.serial = 0

    def step(self, ctx: Context, e: events.Step) -> Finding | None:
        """Fold one step's allocation in; a finding when the window shows a creep."""
        if e.torch_allocated is None or e.rank != 0 or e.torch_allocated < 0:
            return None
        if self.values and e.step <= self.values[-1][0]:
            self.reset()
        if self.values:
            self._push_diff(e.torch_allocated - self.values[-1][1])
        self.values.append((e.step, e.torch_allocated))
        return self._judge(ctx) if len(self.values) == self.WINDOW else None

    def _push_diff(self, diff: int) -> None:
        if len(self.diffs) == self.diffs.maxlen:
            self.rising -= self.diffs[0] > 0
        self.diffs.append(diff)
        self.rising += diff > 0
        self.serial += 1
        while self.maxq and self.maxq[-1][1] <= diff:
            self.maxq.pop()
        self.maxq.append((self.serial, diff))
        while self.maxq[0][0] <= self.serial - len(self.diffs):
            self.maxq.popleft()

    def _judge(self, ctx: Context) -> Finding | None:
        (first_step, first), (last_step, last) = self.values[0], self.values[-1]
        growth = last - first
        if growth < self.MIN_GROWTH or self.rising < self.MIN_RISING * len(self.diffs):
            return None
        if self.maxq[0][1] > self.MAX_JUMP_SHARE * growth:
            return None
        per_step = growth / max(1, last_step - first_step)
        totals = [s.total for g, s in ctx.last_sample.items() if ctx.is_ours(g) and s.total > 0]
        full_at = None
        if totals and per_step > 0:
            full_at = last_step + int((min(totals) - max(last, _used(ctx))) / per_step)
        return Finding("memory_leak", ctx.step, {
            "from_step": first_step, "to_step": last_step, "first": first, "last": last,
            "per_step": per_step, "rising": self.rising, "n": len(self.diffs), "full_at": full_at})


def _used(ctx: Context) -> int:
    return max((s.used_last for g, s in ctx.last_sample.items() if ctx.is_ours(g)), default=0)


class LossWatch:
    """NaN/inf, a loss flat or near zero from the start, and a loss rising well above its best."""

    FLAT_N, ROLL, RISE, RISE_ABS, PATIENCE = 30, 10, 1.5, 0.25, 10

    def __init__(self, recipe: Recipe | None) -> None:
        self.recipe = recipe
        self.first: list[float] = []
        self.flat: list[tuple[int, float]] = []
        self.zero_grads = 0
        self.grad_logs = 0
        self.bad_grad_streak = 0
        self.roll: deque[float] = deque(maxlen=self.ROLL)
        self.best: float | None = None
        self.best_step = 0
        self.rise_streak = 0
        self.lr: float | None = None

    def log(self, ctx: Context, e: events.Log) -> list[Finding]:
        """Fold one Trainer log in; findings it completes."""
        values = {k: events.num_in(v) for k, v in e.values.items()}
        if "train_runtime" in values or "train_loss" in values:
            return []  # the end-of-training summary, not a step's loss
        if values.get("learning_rate") is not None:
            self.lr = values["learning_rate"]
        found = self._nan(e.step, values, sorted(set(ctx.gpu_names.values())))
        loss = values.get("loss")
        if loss is None or loss != loss or abs(loss) == float("inf"):
            return found
        found += self._flat(ctx, e.step, loss, values.get("grad_norm"))
        rise = self._rise(e.step, loss)
        return found + ([rise] if rise else [])

    def _nan(self, step: int, values: dict[str, float | None], names: list[str]) -> list[Finding]:
        loss, grad = values.get("loss"), values.get("grad_norm")
        if loss is not None and not _finite(loss):
            return [Finding("nan_loss", step, {"what": "loss", "value": str(loss), "lr": self.lr, "names": names})]
        if grad is None:
            return []
        self.bad_grad_streak = 0 if _finite(grad) else self.bad_grad_streak + 1
        # fp16's grad scaler skips steps with inf gradients on purpose: only a streak means trouble.
        fp16 = self.recipe is None or self.recipe.training.fp16
        if self.bad_grad_streak >= (3 if fp16 else 1):
            return [Finding("nan_loss", step, {"what": "grad_norm", "value": str(grad), "lr": self.lr,
                                               "streak": self.bad_grad_streak, "names": names})]
        return []

    def _flat(self, ctx: Context, step: int, loss: float, grad: float | None) -> list[Finding]:
        found = []
        if len(self.first) < 5:
            self.first.append(loss)
            if len(self.first) == 5 and sorted(self.first)[2] < 0.05:
                found.append(Finding("loss_flat", step, {"kind": "low", "losses": list(self.first)}))
        if grad is not None and self.grad_logs < 10:
            self.grad_logs += 1
            self.zero_grads += grad == 0.0
            if self.grad_logs == 10 and self.zero_grads >= 5:
                found.append(Finding("loss_flat", step, {"kind": "zero_grad", "zeros": self.zero_grads}))
        if len(self.flat) < self.FLAT_N and step > _warmup_steps(self.recipe, ctx.max_steps) and self.lr:
            self.flat.append((step, loss))
            if len(self.flat) == self.FLAT_N:
                found += self._judge_flat(step)
        return found

    def _judge_flat(self, step: int) -> list[Finding]:
        losses = [v for _, v in self.flat]
        mean = sum(losses) / len(losses)
        spread = max(losses) - min(losses)
        if mean > 0 and spread <= 0.02 * mean:
            return [Finding("loss_flat", step, {
                "kind": "unchanged", "mean": mean, "spread": spread,
                "from_step": self.flat[0][0], "to_step": self.flat[-1][0]})]
        return []

    def _rise(self, step: int, loss: float) -> Finding | None:
        self.roll.append(loss)
        if len(self.roll) < self.ROLL:
            return None
        mean = sum(self.roll) / len(self.roll)
        if self.best is None or mean < self.best:
            self.best, self.best_step = mean, step
        rising = mean > self.RISE * self.best and mean - self.best >= self.RISE_ABS
        self.rise_streak = self.rise_streak + 1 if rising else 0
        if self.rise_streak == self.PATIENCE:
            return Finding("loss_diverging", step, {
                "best": self.best, "best_step": self.best_step, "now": mean, "lr": self.lr})
        return None


def _finite(value: float) -> bool:
    return value == value and abs(value) != float("inf")


def _warmup_steps(recipe: Recipe | None, max_steps: int) -> int:
    """Steps of learning-rate warmup, when the recipe and the run's length say."""
    if recipe is None:
        return 0
    t = recipe.training
    return t.warmup_steps or int(t.warmup_ratio * max(max_steps, t.max_steps, 0))


# -- detectors over output lines ------------------------------------------------------------------

_SETUP = (
    ("bnb_setup", re.compile(
        r"compiled without GPU support|CUDA Setup failed|CUDA SETUP: (?:Problem|CUDA detection failed|"
        r"Required library)|libbitsandbytes_cpu\.so.*undefined symbol|No module named '?bitsandbytes|"
        r"Using `bitsandbytes` \S+ quantization requires|bitsandbytes library load error|"
        r"Could not find the bitsandbytes CUDA binary", re.I)),
    ("flash_attn_unavailable", re.compile(
        r"FlashAttention2 has been toggled on, but it cannot be used|No module named '?flash_attn|"
        r"flash_attn\S*\.so: undefined symbol|FlashAttention only supports Ampere|"
        r"package flash_attn seems to be not installed", re.I)),
    ("cuda_error", re.compile(
        r"CUDA error: (?!out of memory)|device-side assert triggered|illegal memory access|"
        r"CUBLAS_STATUS_(?:EXECUTION_FAILED|INTERNAL_ERROR|NOT_SUPPORTED)|CUDNN_STATUS_(?:EXECUTION_FAILED|"
        r"INTERNAL_ERROR)|Assertion `[^`]+` failed|Watchdog caught collective operation timeout|"
        r"NCCL (?:error|communicator was aborted)|ProcessGroupNCCL.*timed out", re.I)),
)
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
_FRAME = re.compile(r'File "[^"]*", line \d+, in (\w+)')
_FRAME_PHASE = {
    "evaluate": "eval", "_evaluate": "eval", "evaluation_loop": "eval", "prediction_step": "eval",
    "_save_checkpoint": "save", "save_model": "save", "_save": "save", "save_pretrained": "save",
    "training_step": "train", "_inner_training_loop": "train",
    "from_pretrained": "load", "_load_pretrained_model": "load",
}


# -- the advisor ----------------------------------------------------------------------------------


class Advisor:
    """Folds events into advice; `items()` lists it, most important first."""

    def __init__(self, recipe: Recipe | None = None) -> None:
        self.recipe = recipe
        self.ctx = Context()
        self.found: dict[str, Finding] = {}
        self.oom: Finding | None = None
        line = warn_line_bytes(recipe)
        self.vram, self.starve, self.jump = VramWatch(line), StarveWatch(), JumpWatch(line)
        self.leak, self.loss = LeakWatch(), LossWatch(recipe)
        self.estimate: events.Estimate | None = None
        self._items: list[Advice] | None = None

    def feed(self, event: Any) -> None:
        """Fold one event in (unknown kinds are ignored)."""
        name = _HANDLERS.get(type(event))
        if name is not None:
            getattr(self, name)(event)

    def feed_all(self, found: Any) -> "Advisor":
        """Fold many events; returns self."""
        for event in found:
            self.feed(event)
        return self

    def items(self) -> list[Advice]:
        """The advice now, most important first (built lazily, cached until a finding changes)."""
        if self._items is None:
            built = _build_all(self)
            built.sort(key=lambda a: (_SEVERITY_RANK[a.severity], IDS.index(a.id), a.step))
            self._items = built
        return list(self._items)

    def _latch(self, finding: Finding | None) -> None:
        """Keep the first finding of each id (an error replaces an earlier pre-OOM warning)."""
        if finding is not None and finding.id not in self.found:
            self.found[finding.id] = finding
            self._items = None

    # -- event handlers -------------------------------------------------------------------------

    def _on_state(self, e: events.State) -> None:
        self.ctx.state = e.state
        if e.state != events.TRAINING:
            self.starve.reset()

    def _on_trainbegin(self, e: events.TrainBegin) -> None:
        self.ctx.began, self.ctx.max_steps = True, e.max_steps
        self.ctx.training = True  # the train phase opens with it; logs without phases still count
        self.ctx.step = max(self.ctx.step, e.start_step)

    def _on_phase(self, e: events.Phase) -> None:
        if e.name == "train":
            self.ctx.training = e.edge == "begin"
        elif e.name in ("eval", "save"):
            self.ctx.phase = e.name if e.edge == "begin" else ""
            self.jump.phase_peak = 0
            self.starve.reset()

    def _on_step(self, e: events.Step) -> None:
        self.ctx.step = max(self.ctx.step, e.step)
        if e.rank == 0:
            self.starve.step(e)
        self._latch(self.leak.step(self.ctx, e))

    def _on_log(self, e: events.Log) -> None:
        self.ctx.step = max(self.ctx.step, e.step)
        for finding in self.loss.log(self.ctx, e):
            self._latch(finding)

    def _on_gpuinfo(self, e: events.GpuInfo) -> None:
        self.ctx.gpu_names.update(zip(e.indices, e.names))

    def _on_estimate(self, e: events.Estimate) -> None:
        self.estimate = e
        self._items = None

    def _on_sample(self, e: events.Sample) -> None:
        ctx = self.ctx
        ctx.last_sample[e.gpu] = e
        if e.run_pids:
            ctx.ours.add(e.gpu)
        if not ctx.is_ours(e.gpu) or ctx.ended or not ctx.training or e.total <= 0:
            return
        self._latch(self.jump.sample(ctx, e))
        if not ctx.steady_training():
            return
        if self.vram.sample(ctx, e) | self.starve.sample(ctx, e):
            self._items = None

    def _on_output(self, e: events.Output) -> None:
        for line in e.lines:
            self._line(line)

    def _on_end(self, e: events.End) -> None:
        self.ctx.ended = True
        if e.state == events.FAILED and e.error:
            for line in e.error.splitlines()[-40:]:
                self._line(line)
        self._items = None

    def _line(self, line: str) -> None:
        """Scan one output line for a traceback frame, an OOM or a setup error."""
        if len(line) > 4000:
            line = line[:4000]
        if _TRACEBACK.search(line):
            self.ctx.trace_hint = ""
        frame = _FRAME.search(line)
        if frame and frame.group(1) in _FRAME_PHASE:
            self.ctx.trace_hint = _FRAME_PHASE[frame.group(1)]
            return
        report = oom.parse_oom(line)
        if report is not None:
            self._on_oom(report)
            return
        for advice_id, pattern in _SETUP:
            if advice_id not in self.found and pattern.search(line):
                self._latch(Finding(advice_id, self.ctx.step, {"line": line.strip()[:300]}))

    def _on_oom(self, report: oom.OomReport) -> None:
        """Keep the first OOM; a later one with numbers replaces a first one without."""
        if self.oom is not None and (self.oom.facts["report"].kind != oom.UNKNOWN or report.kind == oom.UNKNOWN):
            return
        ctx = self.ctx
        phase = ctx.phase or ctx.trace_hint or ("load" if ctx.state == events.LOADING and not ctx.began else "")
        self.oom = Finding("oom", ctx.step, {"report": report, "phase": phase, "others": ctx.other_pids(),
                                             "names": dict(ctx.gpu_names)})
        self._items = None


_HANDLERS: dict[type, str] = {
    events.State: "_on_state", events.TrainBegin: "_on_trainbegin", events.Phase: "_on_phase",
    events.Step: "_on_step", events.Log: "_on_log", events.GpuInfo: "_on_gpuinfo",
    events.Estimate: "_on_estimate", events.Sample: "_on_sample", events.Output: "_on_output",
    events.End: "_on_end",
}


# -- turning findings into advice: moves computed from the recipe ------------------------------------

Move = tuple[str, dict[str, Any]]
"""What to say and the change that does it."""
gib = oom.gib


def _build_all(adv: Advisor) -> list[Advice]:
    """Every finding of `adv` as advice (unsorted)."""
    built = _oom_advice(adv.oom, adv.recipe) if adv.oom is not None else []
    for finding in adv.found.values():
        if not any(a.id == finding.id for a in built):
            built.append(_BUILDERS[finding.id](finding, adv.recipe))
    vram = adv.vram.current or _projected(adv)
    if vram is not None and adv.oom is None:
        built.append(_vram_advice(vram, adv.recipe))
    if adv.starve.current is not None:
        built.append(_starve_advice(adv.starve.current, adv.recipe))
    return built


def _projected(adv: Advisor) -> Finding | None:
    """The pre-flight estimate over the line, until measured training windows exist."""
    estimate, line = adv.estimate, warn_line_bytes(adv.recipe)
    if estimate is None or adv.vram.seen_training or not 0 < estimate.peak_device_gib < 4096:
        return None
    peak = int(estimate.peak_device_gib * GIB)
    return Finding("vram_near_limit", 0, {"projected": True, "peak": peak, "line": line}) if peak >= line else None


def _memory_move(r: Recipe | None, phase: str = "") -> Move:
    """The first memory saving that fits the recipe: batch, checkpointing, length, then 4-bit."""
    if r is None:
        return "lower per_device_train_batch_size, then max_length, or enable gradient_checkpointing", {}
    t, q, d = r.training, r.quantization, r.data
    quantized = q.load_in_4bit or q.load_in_8bit
    if phase == "load":  # the weights alone did not fit: only quantization or a smaller model helps
        return _four_bit(r) if not quantized else ("the weights alone do not fit: use a smaller model", {})
    if t.per_device_train_batch_size > 1:
        return _halve_batch(t.per_device_train_batch_size, t.gradient_accumulation_steps)
    if not t.gradient_checkpointing:
        return ("enable gradient_checkpointing (less activation memory, ~20-30% slower steps)",
                {"training.gradient_checkpointing": True})
    if d.max_length > 512:
        return (f"lower max_length from {d.max_length} to {d.max_length // 2} (long samples get truncated)",
                {"data.max_length": d.max_length // 2})
    if not quantized:
        return _four_bit(r)
    return "batch 1, checkpointing and 4-bit are all in use: use a smaller model or a larger card", {}


def _halve_batch(batch: int, accum: int) -> Move:
    """Halve the micro-batch and raise accumulation so the effective batch stays the same."""
    new_batch = batch // 2
    new_accum = -(-batch * accum // new_batch)
    return (f"per_device_train_batch_size {batch} -> {new_batch}, gradient_accumulation_steps {accum} -> "
            f"{new_accum} (effective batch {batch * accum} -> {new_batch * new_accum})",
            {"training.per_device_train_batch_size": new_batch, "training.gradient_accumulation_steps": new_accum})


def _four_bit(r: Recipe) -> Move:
    """Load the base model in 4-bit NF4 (QLoRA), with a compute dtype that fits the precision setting."""
    compute = "float16" if r.training.fp16 else "bfloat16"
    return ("load the model in 4-bit (QLoRA: NF4 + double quantization, weights ~1/4 the size)",
            {"quantization.load_in_4bit": True, "quantization.bnb_4bit_quant_type": "nf4",
             "quantization.bnb_4bit_use_double_quant": True, "quantization.bnb_4bit_compute_dtype": compute})


def _lr_move(r: Recipe | None, lr_now: float | None) -> Move:
    """A third of the configured learning rate, naming the current one."""
    if r is None:
        now = f" (now {_num(lr_now)})" if lr_now else ""
        return f"lower the learning rate to about a third{now}", {}
    lr = r.training.learning_rate
    new = float(f"{lr / 3:.2g}")
    return f"lower learning_rate from {_num(lr)} to {_num(new)}", {"training.learning_rate": new}


def _num(value: float | None) -> str:
    return "?" if value is None else f"{value:.3g}"


# -- OOM ----------------------------------------------------------------------------------------------


def _oom_advice(f: Finding, r: Recipe | None) -> list[Advice]:
    """The OOM as advice: where it happened (eval, save) and why (full, fragmented, a neighbour)."""
    report: oom.OomReport = f.facts["report"]
    phase, others = f.facts["phase"], f.facts["others"]
    kind = report.kind
    if kind in (oom.FULL, oom.UNKNOWN) and (others or report.other_pids):
        kind = oom.OTHER_PROCESS
    evidence = _oom_evidence(report, phase, f.step)
    built = []
    if phase in ("eval", "save"):
        built.append(_phase_advice(phase, f.step, r, evidence, ERROR))
    if kind == oom.OTHER_PROCESS:
        built.append(_other_process_advice(report, others, f.step, evidence))
    elif kind == oom.FRAGMENTATION:
        spare = gib(report.reserved_unallocated)
        built.append(Advice("oom_fragmentation", ERROR,
                            f"CUDA OOM from fragmentation: {spare} reserved but unallocated; set "
                            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                            evidence, {"env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}, f.step))
    elif phase not in ("eval", "save"):
        text, change = _memory_move(r, phase)
        where = ("while loading the model" if phase == "load" else "the card is full" if kind == oom.FULL
                 else "the message gives no usable numbers")
        built.append(Advice("oom_full", ERROR, f"CUDA out of memory ({where}): {text}", evidence, change, f.step))
    return built


def _oom_evidence(report: oom.OomReport, phase: str, step: int) -> list[str]:
    """The OOM's numbers as short lines."""
    gpu = f"GPU {report.gpu}" if report.gpu is not None else "the GPU"
    rank = f"rank {report.rank}: " if report.rank is not None else ""
    where = {"eval": "during evaluation", "save": "while saving a checkpoint", "load": "while loading",
             "train": "in a training step"}.get(phase, "")
    when = ", ".join(part for part in (where, f"after step {step}" if step else "") if part)
    lines = [f"{rank}{when}"] if rank or when else []
    if report.requested is not None:
        lines.append(f"tried to allocate {gib(report.requested)} on {gpu}")
    if report.total is not None:
        lines.append(f"{gib(report.free)} free of {gib(report.total)} total")
    if report.allocated is not None:
        lines.append(f"PyTorch: {gib(report.allocated)} allocated, {gib(report.reserved_unallocated)} "
                     "reserved but unallocated")
    if report.other_used is not None and report.other_used >= GIB:
        lines.append(f"other than this process's PyTorch memory: {gib(report.other_used)} in use")
    if report.note:
        lines.append(f"numbers ignored: {report.note}")
    lines.append(report.text[:240])
    return lines


def _other_process_advice(report: oom.OomReport, others: list[tuple[int, int]], step: int,
                          evidence: list[str]) -> Advice:
    """Name the processes holding memory on this run's GPU."""
    pids = list(others) or list(report.other_pids)
    named = ", ".join(f"PID {pid} ({gib(used)})" for pid, used in pids[:6])
    held = gib(sum(b for _, b in pids)) if pids else gib(report.other_used)
    title = f"CUDA OOM: other processes hold {held} of the card" + (f": {named}" if named else "")
    extra = ["stop them (nvidia-smi lists them; kill -9 a zombie) or choose another GPU with CUDA_VISIBLE_DEVICES"]
    return Advice("oom_other_process", ERROR, title, evidence + extra, {}, step)


def _phase_advice(phase: str, step: int, r: Recipe | None, evidence: list[str], severity: str) -> Advice:
    """OOM (or a jump toward it) in an eval or save phase, with that phase's settings to change."""
    text, change = _eval_move(r) if phase == "eval" else _save_move(r)
    what = "evaluation" if phase == "eval" else "checkpoint save"
    lead = f"CUDA out of memory during {what}" if severity == ERROR else f"VRAM jumps over the line during {what}"
    return Advice(f"oom_at_{phase}", severity, f"{lead}: {text}", evidence, change, step)


def _eval_move(r: Recipe | None) -> Move:
    if r is None:
        return "lower per_device_eval_batch_size or set eval_accumulation_steps", {}
    t = r.training
    if t.per_device_eval_batch_size > 1:
        new = t.per_device_eval_batch_size // 2
        return (f"per_device_eval_batch_size {t.per_device_eval_batch_size} -> {new}",
                {"training.per_device_eval_batch_size": new})
    if t.eval_accumulation_steps is None:
        return ("set eval_accumulation_steps = 1 (move eval outputs to the CPU every step)",
                {"training.eval_accumulation_steps": 1})
    return "evaluate a smaller eval set or less often (eval batch is already 1)", {}


def _save_move(r: Recipe | None) -> Move:
    if r is not None and not r.training.save_only_model:
        return ("set save_only_model = true (smaller saves; the optimizer state is not kept for resuming)",
                {"training.save_only_model": True})
    return ("set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True so cached blocks can serve the save",
            {"env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})


def _jump_advice(f: Finding, r: Recipe | None) -> Advice:
    """A pre-OOM warning: an eval or save window crossed the line as a jump over the training peak."""
    phase = f.id.removeprefix("oom_at_")
    evidence = [f"training peak {gib(f.facts['train_peak'])}, {phase} peak {gib(f.facts['phase_peak'])}",
                f"warning line {gib(f.facts['line'])}", f"{phase} at step {f.step}"]
    return _phase_advice(phase, f.step, r, evidence, WARNING)


# -- VRAM, loss, memory, data -------------------------------------------------------------------------


def _vram_advice(f: Finding, r: Recipe | None) -> Advice:
    """Over the warning line: the first memory saving that fits the recipe."""
    facts = f.facts
    text, change = _memory_move(r)
    peak, line = facts["peak"], facts["line"]
    if facts.get("projected"):
        return Advice("vram_near_limit", WARNING, f"Projected peak {gib(peak)} is over the {gib(line)} "
                      f"warning line: {text}", [f"pre-flight estimate {gib(peak)}",
                                               f"warning line {gib(line)} (warn_gb, GiB)"], change, f.step)
    total = facts["total"]
    severity = ERROR if total and peak >= 0.97 * total else WARNING
    name = f" ({facts['name']})" if facts.get("name") else ""
    evidence = [f"GPU {facts['gpu']}{name}: peak {gib(peak)} of {gib(total)}",
                f"{facts['windows']} sampling windows over the line within 10 s",
                f"warning line {gib(line)}" + (" (95% of the card)" if line < facts["warn"] else " (warn_gb, GiB)")]
    return Advice("vram_near_limit", severity, f"VRAM peak {gib(peak)} is over the {gib(line)} line: {text}",
                  evidence, change, f.step)


def _nan_advice(f: Finding, r: Recipe | None) -> Advice:
    facts = f.facts
    text, change = _nan_move(r, facts.get("lr"), facts.get("names", []))
    evidence = [f"first non-finite {facts['what']} at step {f.step}: {facts['value']}"]
    if facts.get("streak", 1) > 1:
        evidence.append(f"{facts['streak']} logs in a row")
    if r is not None:
        t = r.training
        precision = "bf16" if t.bf16 else "fp16" if t.fp16 else "fp32"
        evidence.append(f"optim = {t.optim}, gradient_checkpointing = {str(t.gradient_checkpointing).lower()}, "
                        f"{precision}, learning_rate = {_num(t.learning_rate)}")
    return Advice("nan_loss", ERROR, f"{facts['what']} became {facts['value']} at step {f.step}: {text}",
                  evidence, change, f.step)


_NO_BF16 = re.compile(r"V100|\bT4\b|P100|P40|\bP4\b|K80|M40|M60|GTX|RTX 20\d\d|Quadro RTX|TITAN (?:V|RTX|Xp)", re.I)


def _nan_move(r: Recipe | None, lr_now: float | None, names: list[str]) -> Move:
    """8-bit optimizer first (a known NaN source), then fp16 -> bf16, then a lower learning rate."""
    if r is None:
        return _lr_move(None, lr_now)
    t, q = r.training, r.quantization
    if "8bit" in t.optim:
        why = " with gradient checkpointing" if t.gradient_checkpointing else ""
        return (f"switch optim from {t.optim} to adamw_torch (8-bit optimizers{why} can turn the loss NaN)",
                {"training.optim": "adamw_torch"})
    if t.fp16 and not any(_NO_BF16.search(n) for n in names):
        change: dict[str, Any] = {"training.fp16": False, "training.bf16": True}
        if q.load_in_4bit and q.bnb_4bit_compute_dtype == "float16":
            change["quantization.bnb_4bit_compute_dtype"] = "bfloat16"
        return "switch fp16 to bf16 (fp16 overflows; bf16 needs an Ampere or newer card)", change
    return _lr_move(r, lr_now)


def _flat_advice(f: Finding, r: Recipe | None) -> Advice:
    facts, check = f.facts, "check the labels (answer tokens kept, prompt and padding -100), the attention mask, " \
        "and the chat template"
    if facts["kind"] == "low":
        median = sorted(facts["losses"])[2]
        title = f"Loss is near zero from the start ({median:.3g}): the labels are likely wrong"
        evidence = ["first losses: " + ", ".join(f"{v:.3g}" for v in facts["losses"]), check,
                    "and that the answer is not also in the input"]
    elif facts["kind"] == "zero_grad":
        title = f"grad_norm is 0 in {facts['zeros']} of the first 10 logs: nothing is training"
        evidence = [check, "and that lora target_modules name layers the model has"]
    else:
        spread = facts["spread"] / facts["mean"]
        title = f"Loss is flat from the start ({facts['mean']:.3g} ± {spread:.1%}): check the data"
        evidence = [f"steps {facts['from_step']}-{facts['to_step']}: range {facts['spread']:.3g}", check]
    change: dict[str, Any] = {}
    if facts["kind"] == "unchanged" and r is not None and r.training.learning_rate < 1e-5:
        change = {"training.learning_rate": 2e-4}
        evidence.append(f"learning_rate = {_num(r.training.learning_rate)} is far below LoRA's usual 1e-4 to 3e-4")
    return Advice("loss_flat", WARNING, title, evidence, change, f.step)


def _diverging_advice(f: Finding, r: Recipe | None) -> Advice:
    facts = f.facts
    text, change = _lr_move(r, facts.get("lr"))
    lora = r.lora if r is not None else None
    if lora is not None and not lora.use_rslora and lora.lora_alpha > 2 * lora.r:
        text = f"lower lora_alpha from {lora.lora_alpha:g} to {2 * lora.r} (alpha/r = {lora.lora_alpha / lora.r:g})"
        change = {"lora.lora_alpha": 2 * lora.r}
    evidence = [f"mean of the last 10 losses {facts['now']:.3g}, best {facts['best']:.3g} at step "
                f"{facts['best_step']}", "rising for 10 logs in a row",
                f"learning rate at step {f.step}: {_num(facts.get('lr'))}"]
    return Advice("loss_diverging", WARNING, f"Loss is rising ({facts['best']:.3g} -> {facts['now']:.3g}): {text}",
                  evidence, change, f.step)


def _leak_advice(f: Finding, r: Recipe | None) -> Advice:
    facts = f.facts
    growth = facts["last"] - facts["first"]
    evidence = [f"torch allocated at step end: {gib(facts['first'])} at step {facts['from_step']} -> "
                f"{gib(facts['last'])} at step {facts['to_step']}",
                f"rose in {facts['rising']} of {facts['n']} steps, {facts['per_step'] / MIB:.1f} MiB a step",
                "check for tensors kept across steps: a collate function or callback appending to a list, "
                "a loss kept without .item()"]
    if facts.get("full_at") is not None:
        evidence.insert(2, f"at this rate the card is full around step {facts['full_at']}")
    return Advice("memory_leak", WARNING, f"Memory creeps up {gib(growth)} over steps {facts['from_step']}-"
                  f"{facts['to_step']}: something keeps tensors", evidence, {}, f.step)


def _starve_advice(f: Finding, r: Recipe | None) -> Advice:
    facts = f.facts
    text, change = "pre-tokenise the data and keep __getitem__ cheap", {}
    if r is not None:
        t = r.training
        if t.dataloader_num_workers < 16:
            new = 4 if t.dataloader_num_workers == 0 else min(16, 2 * t.dataloader_num_workers)
            text = f"dataloader_num_workers {t.dataloader_num_workers} -> {new}"
            change = {"training.dataloader_num_workers": new}
        elif not t.dataloader_pin_memory:
            text, change = "set dataloader_pin_memory = true", {"training.dataloader_pin_memory": True}
    evidence = [f"GPU utilisation {facts['util']:.0f}% on average over {facts['span']:.0f} s of training",
                f"{facts['gap']:.0%} of the time between step ends is spent outside the step (loading data)",
                f"{facts['steps']} steps, {facts['per_step']:.2f} s apart"]
    return Advice("data_starved", INFO, f"The GPU waits for data ({facts['util']:.0f}% busy): {text}",
                  evidence, change, f.step)


def _setup_advice(f: Finding, r: Recipe | None) -> Advice:
    line = f.facts["line"]
    if f.id == "bnb_setup":
        return Advice("bnb_setup", ERROR, "bitsandbytes cannot use the GPU: run `python -m bitsandbytes` for the "
                      "reason", [line, "install a bitsandbytes build for torch's CUDA: pip install -U bitsandbytes"],
                      {}, f.step)
    if f.id == "flash_attn_unavailable":
        change = {"model.attn_implementation": "sdpa"}
        if r is not None and r.model.attn_implementation != "flash_attention_2":
            change = {}
        return Advice(f.id, ERROR, "flash-attention cannot be used here: use attn_implementation = \"sdpa\"",
                      [line, "sdpa needs no extra package and is close in speed"], change, f.step)
    return _cuda_error_advice(f, line)


_CUDA_HINTS = (
    ("srcIndex < srcSelectDimSize", "a token id is outside the embedding table: resize the embeddings after "
     "adding tokens, or use the model's own tokenizer"),
    ("t < n_classes", "a label id is out of range: labels must be token ids or -100"),
    ("no kernel image", "this torch build has no kernels for this GPU: install a torch built for its CUDA "
     "capability"),
)


_NCCL = re.compile(r"Watchdog caught collective operation timeout|NCCL|ProcessGroupNCCL", re.I)


def _nccl_advice(f: Finding, line: str) -> Advice:
    """A collective timed out or NCCL failed: one rank stalled, died or went its own way."""
    evidence = [line, "one rank stopped joining collectives: find the first error in the other ranks' output",
                "work done by one rank alone (uneven data, eval or save on rank 0 only) trips the same timeout"]
    return Advice("cuda_error", ERROR, "NCCL collective failed or timed out: rerun with NCCL_DEBUG=INFO",
                  evidence, {"env.NCCL_DEBUG": "INFO"}, f.step)


def _cuda_error_advice(f: Finding, line: str) -> Advice:
    if _NCCL.search(line):
        return _nccl_advice(f, line)
    hint = next((text for key, text in _CUDA_HINTS if key in line), "")
    change: dict[str, Any] = {"env.CUDA_LAUNCH_BLOCKING": "1"}
    if "no kernel image" in line:
        change = {}
    evidence = [line] + ([hint] if hint else [])
    if change:
        evidence.append("the op named in an asynchronous CUDA error is often the wrong one; "
                        "CUDA_LAUNCH_BLOCKING=1 makes the traceback point at the failing op")
    title = f"CUDA error: {hint.split(':')[0]}" if hint else "CUDA error: rerun with CUDA_LAUNCH_BLOCKING=1"
    return Advice("cuda_error", ERROR, title, evidence, change, f.step)


_BUILDERS = {
    "oom_at_eval": _jump_advice, "oom_at_save": _jump_advice, "nan_loss": _nan_advice,
    "loss_flat": _flat_advice, "loss_diverging": _diverging_advice, "memory_leak": _leak_advice,
    "bnb_setup": _setup_advice, "flash_attn_unavailable": _setup_advice, "cuda_error": _setup_advice,
}
