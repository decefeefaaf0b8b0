"""Event types of a run's log (`events.jsonl`) and their JSON-lines codec.

One JSON object a line, tagged by `kind`. The first line is a `Header` carrying the schema version.
Writers (supervisor and trainer) append whole lines; readers (live view, attach, replay, doctor) decode
them with `decode_line`, which never raises: a torn or unknown line comes back as `None` or `Unknown`.
Non-finite floats (a NaN loss is the most important fact a run can record) are written as the strings
"NaN", "Infinity" and "-Infinity", since JSON has no spelling for them.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Union

import msgspec

SCHEMA_VERSION = 1

MAX_INT = 2**53
"""The largest integer a log may carry (a float's exact range): `step = 10**30` is damage, not a fact, and
would overflow the C sizes (indexes, widths) it reaches."""
Int = Annotated[int, msgspec.Meta(ge=-MAX_INT, le=MAX_INT)]
Time = Annotated[float, msgspec.Meta(ge=-1e12, le=1e12)]
"""Seconds since the epoch, within 30 000 years of it: `t = 1e308` would overflow every date conversion."""

# Run states, in the vocabulary the status bar shows.
STARTING, LOADING, TRAINING, PAUSED, SUSPENDED = "starting", "loading", "training", "paused", "suspended"
FINISHED, FAILED, STOPPED = "finished", "failed", "stopped"
FINAL_STATES = frozenset({FINISHED, FAILED, STOPPED})

Num = Union[float, str, None]
"""A float that may be non-finite: NaN and infinities travel as strings."""


class Event(msgspec.Struct, frozen=True, tag_field="kind", kw_only=True, omit_defaults=True):
    """Base of every event; `t` is wall-clock seconds since the epoch."""

    t: Time


class Header(Event, frozen=True, tag="header"):
    """First line of a log: who wrote it and for which recipe."""

    schema: Int
    run_id: str
    recipe_hash: str
    recipe_path: str = ""
    name: str = ""
    created: str = ""
    loratui_version: str = ""
    argv: list[str] = []
    warn_gb: float | None = None
    """The run's VRAM warning line (GiB): a fact of the run, so a replay of a bare log draws the same line."""
    gpu_totals: list[Int] = []
    """Each sampled card's total memory (bytes) when the run started."""
    command: list[str] = []  # `loratui run -- COMMAND`: the watched command line (empty for a recipe run)
    cwd: str = ""  # where the command runs
    env: dict[str, str] = {}  # a redacted summary of its environment (secrets' values dropped)
    controls: list[str] = []  # control commands the run supports until its trainer says more; [] = all
    slurm: dict[str, str] = {}
    """The Slurm job the run started in (slurm.JOB_ENV: job id, node, rank, restart count); empty outside."""
    node: str = ""  # the host that wrote this log (rundir.node_name)
    clock_offset: float = 0.0
    """The shared filesystem's clock minus this host's (s), measured at start: lines up several nodes' logs."""

    @property
    def job_id(self) -> str:
        """The Slurm job the run started in ('' outside Slurm): what `ls`, the MCP tools and the views' header
        show, with `node`."""
        return self.slurm.get("SLURM_JOB_ID", "")


class State(Event, frozen=True, tag="state"):
    """The run changed state (starting, loading, training, paused, suspended, finished, failed, stopped)."""

    state: str
    reason: str = ""
    step: Int | None = None


class TrainBegin(Event, frozen=True, tag="train_begin"):
    """The trainer built everything and is about to take its first step."""

    max_steps: Int
    num_epochs: float
    start_step: Int = 0
    device: str = ""
    params_total: Int = 0
    params_trainable: Int = 0
    batch_size: Int = 1
    grad_accum: Int = 1
    max_length: Int = 0
    world_size: Int = 1
    pid: Int = 0
    versions: dict[str, str] = {}
    controls: list[str] = []  # control commands this trainer obeys ([] = all of them: a recipe run)
    pause_mode: str = ""  # "signal" where pause is SIGSTOP of the process group (no step boundary)


class Step(Event, frozen=True, tag="step"):
    """One optimiser step ended; memory figures are bytes, the peaks since the previous step."""

    step: Int
    epoch: float
    step_time: float
    tokens: Int = 0
    tokens_seen: Int = 0
    torch_allocated: Int | None = None
    torch_reserved: Int | None = None
    peak_allocated: Int | None = None
    peak_reserved: Int | None = None
    max_len: Int = 0  # longest (padded) sequence among this step's micro-batches
    rank: Int = 0


class Log(Event, frozen=True, tag="log"):
    """A dict the Trainer logged (loss, grad_norm, learning_rate, eval_loss, train_runtime, ...)."""

    step: Int
    values: dict[str, Num]
    rank: Int = 0


class Phase(Event, frozen=True, tag="phase"):
    """A phase (train, eval, save) began or ended."""

    name: str
    edge: str  # "begin" | "end"
    step: Int = 0
    rank: Int = 0


class GpuInfo(Event, frozen=True, tag="gpu_info"):
    """What the GPU probe found: the devices, or why there is no reading (no NVML, no GPU)."""

    available: bool
    reason: str = ""
    names: list[str] = []
    totals: list[Int] = []
    indices: list[Int] = []


class Sample(Event, frozen=True, tag="sample"):
    """One record window of one GPU: device-used max/last/min (bytes), utilisation, run processes."""

    gpu: Int
    used_max: Int
    used_last: Int
    used_min: Int
    total: Int
    util: Int | None = None  # percent; None when NVML cannot say
    n: Int = 1  # readings in the window
    procs: dict[str, Int] = {}  # pid -> bytes, every compute process on the GPU
    run_pids: list[Int] = []  # which of those pids belong to this run


def others_used(e: Sample, pids_match: bool = False) -> int:
    """Bytes other processes held on the GPU at the window's last reading. Device "used" counts every
    process: a neighbour's 112 GiB made a run that fitted in 23 GiB read as 135 GiB on the H200, so a run's
    own peak (its estimate check, a guard verdict) leaves them out. A sample with none of the run's pids is
    all others only once NVML's pids are known to match the run's (`pids_match`: between two trainer lives);
    in a container NVML reports host pids that never match, and then nothing is left out."""
    if not e.run_pids and not pids_match:
        return 0
    mine = {str(pid) for pid in e.run_pids}
    return sum(b for pid, b in e.procs.items() if pid not in mine)


class SamplerStats(Event, frozen=True, tag="sampler_stats"):
    """The sampler's achieved rate and its own CPU cost (share of one core)."""

    target_hz: float
    achieved_hz: float
    cpu_share: float
    note: str = ""


class Output(Event, frozen=True, tag="output"):
    """Lines the trainer printed (stdout or stderr), batched."""

    stream: str
    lines: list[str]


class Control(Event, frozen=True, tag="control"):
    """A control command was accepted (pause, resume, suspend, save, stop)."""

    command: str
    source: str = ""


class Notice(Event, frozen=True, tag="notice"):
    """Something the user should know that is not an error (a fallback, a skipped setting)."""

    level: str  # "info" | "warning" | "error"
    message: str
    key: str = ""


class Estimate(Event, frozen=True, tag="estimate"):
    """The pre-flight VRAM estimate for this recipe (GiB)."""

    peak_device_gib: float
    peak_reserved_gib: float
    components: dict[str, float] = {}
    config: dict[str, Any] = {}
    """The model's shape facts (config.json keys the estimator reads), so advice can price every move."""
    seq: Int = 0
    """The sequence length the estimate is at (the data's longest example)."""
    runtime: dict[str, Any] = {}
    """What a watched trainer was seen to do unlike a recipe run (logic/estimate.RUNTIME_KEYS), for pricing moves."""


class Settings(Event, frozen=True, tag="settings"):
    """A watched Trainer's live settings at train begin, as the recipe TOML it amounts to (the run's
    recipe.toml). In the log so every fold (the supervisor's alerts, the live panel, headless, doctor,
    replay) advises from the same recipe from the same point on."""

    recipe: str
    lengths: dict[str, Int] | None = None
    """The length fields of a config that has no max_length (`GRPOConfig.max_completion_length`: 512), so a length
    move names them (trainer/preflight.config_lengths); None where the recipe's max_length is the config's own."""


class Checkpoint(Event, frozen=True, tag="checkpoint"):
    """A checkpoint was written."""

    step: Int
    path: str


class Stacks(Event, frozen=True, tag="stacks"):
    """Every thread's Python stack of every trainer rank (faulthandler's dump), keyed by rank."""

    ranks: dict[str, str]
    reason: str = ""


class End(Event, frozen=True, tag="end"):
    """The run ended: its final state, the trainer's exit code or signal and, on failure, the error."""

    state: str
    exit_code: Int | None = None
    signal: str = ""
    error: str = ""
    step: Int = 0
    cause: str = ""
    """Who ended it when the run did not: Slurm's job state (TIMEOUT, CANCELLED, OUT_OF_MEMORY, ...)."""


class Exit(Event, frozen=True, tag="exit"):
    """The trainer (rank 0), or a watched command's keeper, is about to exit, and how, as it knows it. The
    supervisor's End follows within milliseconds; a reader that finds no End and nobody alive takes this as
    the run's outcome (the supervisor was killed in between) instead of calling the run lost."""

    state: str
    exit_code: Int = 0
    step: Int = 0

    def as_end(self) -> "End":
        """The End the supervisor would have written (its stderr tail is not known here)."""
        error = (f"exit code {self.exit_code}; the supervisor died before it recorded the end (its error "
                 "text is in trainer.stderr.log)") if self.state == FAILED else ""
        return End(t=self.t, state=self.state, exit_code=self.exit_code, step=self.step, error=error)


class Unknown(msgspec.Struct, frozen=True, kw_only=True):
    """An event of a kind this version does not know (a newer schema); kept, not interpreted."""

    kind: str
    t: float = 0.0
    raw: dict[str, Any] = {}


AnyEvent = Union[
    Header, State, TrainBegin, Step, Log, Phase, GpuInfo, Sample, SamplerStats, Output, Control,
    Notice, Estimate, Checkpoint, Stacks, End, Settings, Exit,
]

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(AnyEvent)
_loose = msgspec.json.Decoder(dict[str, Any])


def encode(event: AnyEvent) -> bytes:
    """One event as one JSON line, newline included."""
    return _encoder.encode(event) + b"\n"


def decode_line(line: bytes) -> AnyEvent | Unknown | None:
    """Decode one line; `None` for a line that is not a JSON object (torn, empty, junk, or nested too deep
    for the decoder: one hostile line is skipped, never fatal)."""
    try:
        return _decoder.decode(line)
    except msgspec.DecodeError:
        pass
    except RecursionError:
        return None
    try:
        raw = _loose.decode(line)
    except (msgspec.DecodeError, RecursionError):
        return None
    kind = raw.get("kind")
    if not isinstance(kind, str):
        return None
    t = raw.get("t", 0.0)
    return Unknown(kind=kind, t=float(t) if isinstance(t, (int, float)) and abs(t) <= 1e12 else 0.0, raw=raw)


def num_out(value: float | int | None) -> Num:
    """A float for the log: non-finite values become their JSON-safe string spelling."""
    if value is None:
        return None
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def num_in(value: Num) -> float | None:
    """A float read back from the log; strings become NaN or infinities, junk becomes None."""
    if value is None or isinstance(value, float):
        return value
    if isinstance(value, int):
        return float(value)
    try:
        return float(value)
    except ValueError:
        return None


def is_train_summary(values: dict) -> bool:
    """Whether a Trainer log is its end-of-training summary (`train_runtime` beside `train_loss`, `total_flos`...),
    not a step's log. `train_runtime` alone does not say so: with `include_num_input_tokens_seen` every step's
    log carries `train_runtime` and `train_tokens_per_second` beside its `loss`; the summary never has a `loss`."""
    return "train_runtime" in values and "loss" not in values


def logged_loss(values: dict[str, Num]) -> float | None:
    """The loss a training log stands for: NaN where transformers printed 0.0 for a NaN step.

    Under `logging_nan_inf_filter` (the default) a NaN step adds nothing to the window's sum, so a window
    of NaN steps logs `'loss': 0.0` beside a non-finite `grad_norm`; that is a NaN step, not a zero loss.
    One rule for every reader of a loss (the run state, the advisor, status.json, the supervisor's alerts)."""
    loss, grad = num_in(values.get("loss")), num_in(values.get("grad_norm"))
    if loss is not None and loss == 0.0 and grad is not None and not math.isfinite(grad):
        return math.nan
    return loss
