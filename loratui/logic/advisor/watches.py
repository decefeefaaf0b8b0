"""The advisor's detectors: each folds events into a `Finding` when its evidence and patience are met."""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

from loratui import events
from loratui.logic.advisor import cuda
from loratui.logic.advisor.advice import GIB, MIB, Finding, line_for

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
        line = line_for(self.line, e.total)
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
        line = line_for(self.line, e.total)
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


# -- detectors over output lines ------------------------------------------------------------------

_UNAVAILABLE = (r"not installed|not available|unavailable|not (?:be )?supported|does not support|doesn't support|"
                r"cannot be used|can't be used|failed|could not|couldn't|cannot (?:find|load|import|open)|unable to|"
                r"no module|undefined symbol|dll load|is not defined|not found|no such file|only supports?\b|"
                r"incompatible|not compatible|not compiled|without GPU|no kernel image")
"""What a library says when it cannot be used: not installed, not importable, not built for this GPU or OS."""
_FLASH = r"flash[_\- ]?attn|flash[_\- ]?attention"
_FLASH_PARTS = r"dropout[_-]layer[_-]norm|rotary[_-]emb|fused[_-]dense[_-]lib|xentropy[_-]cuda[_-]lib"
"""flash-attention's optional CUDA extensions, built from its csrc/ (layer_norm, rotary, fused_dense_lib, xentropy)
as model READMEs ask (`pip install csrc/layer_norm`): their build failing is flash-attn's (Qwen#241)."""
TRITON_DOT = r"\bdot\(\) got an unexpected keyword argument \W?trans_[ab]\b"
"""flash-attention's Triton kernel (flash_attn_triton.py and its copies in remote code) run on Triton 2.0 or newer,
whose tl.dot takes no trans_b: read as flash-attention that cannot be used, and given its own advice (moves.py)."""
_SETUP = (
    # bitsandbytes' setup in every version: the old `CUDA SETUP:` lines, the CPU-only binary it fell back to
    # (`bin ...libbitsandbytes_cpu.so`), its native library (CUDA, ROCm, Windows .dll) beside a word of failure,
    # a build without GPU support. Not any line that names the package: a healthy CPU run's optional kernels
    # ("Failed to load CPU gemm_4bit_forward from kernels-community/quantization-bitsandbytes") are no failure.
    ("bnb_setup", re.compile(
        r"(?:CUDA|ROCm|HIP|XPU) Setup failed despite|CUDA Setup failed|does not support Int8 Matmul|"
        # a message that asks for it (installed, upgraded, with CUDA), not a command line that installs it
        r"^(?!\s*(?:[!%$>]\s*)?(?:pip3?|python3? -m pip|conda|uv|mamba)\b).*?(?:\brequires?\b|\bplease install\b|"
        r"\bupgrade\b)[^\n]{0,120}?(?<![A-Za-z0-9_])bitsandbytes(?![A-Za-z0-9_])|"
        r"(?<![A-Za-z0-9_])bitsandbytes\b[^\n]{0,60}?\b(?:is not installed|requires CUDA)|Failed to import \S*bitsandbytes|"
        r"No GPU found\. A GPU is needed for quantization|"
        r"bitsandbytes\S* is not a supported wheel|(?:satisfies the requirement|No matching distribution found for) "
        r"bitsandbytes|CUDA SETUP: (?:Problem|CUDA detection failed|Required library|Something unexpected|"
        r"Setup Failed|Solution)|libbitsandbytes_cpu|"
        r"No module named '?bitsandbytes|Using `bitsandbytes` \S+ quantization requires|"
        r"bitsandbytes (?:library load error|native library|CUDA binary)|"
        r"version of `?bitsandbytes`? that is not compatible|"
        # the person's words, in the clause that names it: `bitsandbytes doesn't work on Windows`, `bitsandbytes 报错`,
        # `遇到了bitsandbytes报错` (Chinese touching the name: no `\b` stands there)
        r"(?<![A-Za-z0-9_])bitsandbytes(?![A-Za-z0-9_])[^.,;。，；\n]{0,40}?(?:(?:does ?n[o']t|do ?n[o']t|won'?t|will not|is ?n[o']t|never) work(?:s|ing)?\b|"
        r"\bfail(?:s|ed|ing|ure)?\b|\b(?:is |was )?too old\b|不支持|装不上|安装失败|编译失败|用不了|不能用|"
        r"版本不(?:对|匹配|兼容)|(?<!没有)(?<!没)(?<!不)(?:报错|出错))|"
        r"\b(?:can'?t|cannot|unable to|could ?n'?t|fail(?:s|ed)? to) (?:get |make )?bitsandbytes\b[^.,;\n]{0,30}?"
        r"\b(?:work|use the GPU|run|install|load|find)|"
        # its build from source failing (no wheel for this platform, its CUDA kernels not compiling)
        r"(?:Error building extension|Failed building wheel for|Could not build wheels for|failed\b.{0,120}?\bcompiling)"
        r" '?\S*bitsandbytes|"
        # its native functions missing: the library loaded without its CUDA binary
        r"'NoneType' object has no attribute 'c\w*(?:blockwise|adam|nf4|fp4|8bit|32bit|managed)\w*'|"
        r"bitsandbytes\b.{0,200}?(?:compiled without GPU|without GPU support|not compiled with (?:CUDA|GPU))|"
        # its CUDA kernels not built for this GPU: `Error named symbol not found at line 74 in file .../csrc/ops.cu`
        r"\bError [\w ]{3,60} at line \d+ in file \S*(?:bitsandbytes\S*|csrc[/\\]ops\.cu)|"
        # its int8 matmul on a GPU without int8 tensor cores, and a version too old for what is asked of it
        r"cuBLAS API failed with status \d+|module '?bitsandbytes[\w.]*'? has no attribute|"
        r"libbitsandbytes\w*.{0,300}?(?:" + _UNAVAILABLE + r")|(?:" + _UNAVAILABLE + r").{0,300}?libbitsandbytes",
        re.I)),
    # flash attention by any spelling, beside a word that says it cannot be used (not installed, a DLL or
    # symbol that does not load, a model that does not support it, a function left undefined).
    # Not transformers' load-time note that the model is still float32 (the Trainer's autocast runs it in half).
    # Not a name another package lacks (`cannot import name 'is_flash_attn_available' from 'transformers.utils'`:
    # the model's code and transformers' version disagree, flash-attention is not involved).
    ("flash_attn_unavailable", re.compile(
        r"^(?!.*cannot import name '[^']*' from '(?!flash))(?:"
        r"^(?!.*\bcurrent dt?ype\b).*?(?:" + _FLASH + r").{0,300}?(?:" + _UNAVAILABLE + r"|version|>=)|"
        r".*?(?:" + _UNAVAILABLE + r").{0,300}?(?:" + _FLASH + r")|.*?in _check_and_enable_flash_attn_2\b|"
        # its own check of the card or the toolkit: `FlashAttention only supports Ampere GPUs or newer`, `FlashAttention
        # is only supported on CUDA 11 and above`, `... currently only supports MI100 and RX7000 and above`
        r".*?(?:" + _FLASH + r")[^.\n]{0,30}?\b(?:is |are )?(?:currently )?only (?:supports?|supported)\b"
        r"(?!\s+(?:torch\.)?(?:float|fp|bf|half|dtype))|"  # not its dtypes: the load-time note below
        # its older builds' GPU check, in torch's TORCH_CHECK words: `Expected is_sm90 || is_sm8x || is_sm75 to be
        # true, but got false` (a V100, a P100, a card before Turing)
        r".*?Expected (?:is_sm\d+x?\s*\|\|\s*)*is_sm\d+x? to be true|"
        # xFormers' memory-efficient attention with no kernel for this build or input (its flash kernel among them):
        # `No operator found for `memory_efficient_attention_forward``, `xFormers wasn't build with CUDA support`
        r".*?No operator found for\W{0,3}memory_efficient_attention|.*?xFormers (?:wasn't|was not) buil[dt] with CUDA|"
        # the model's code saying it runs without it: `You are not running the flash-attention implementation, expect
        # numerical differences` (Phi-3), `Flash attention is not used, falling back to eager attention`
        r".*?\b(?:You are|is|are|it is) not (?:running|using|being used)\b.{0,20}?(?:" + _FLASH + r")|"
        r".*?(?:" + _FLASH + r").{0,60}?\b(?:is not|isn't|not) (?:being )?used\b|"
        r".*?(?:" + _FLASH + r").{0,80}?\bfall(?:s|ing)? ?back\b|"
        # the person's words, in the same clause as its name: `Flash attention 2 doesn't work on Windows`,
        # `flash_attn版本不对`, `flash-attn 装不上`
        r".*?(?:" + _FLASH + r")[^.,;。，；\n]{0,40}?(?:(?:does ?n[o']t|do ?n[o']t|won'?t|will not|is ?n[o']t|never) "
        r"work(?:s|ing)?\b|不支持|装不上|安装失败|编译失败|无法(?:安装|使用|导入|加载)|用不了|不能用|版本不(?:对|匹配|兼容)|"
        r"(?<!没有)(?<!没)(?<!不)(?:报错|出错))|"
        # its build failing: `Building wheel for flash-attn (setup.py) ... error`, `Failed building wheel for flash-attn`
        r".*?Building wheel for\s+(?:" + _FLASH + r").{0,40}?\.\.\.\s*error\b|"
        r".*?(?:Failed building wheel for|Could not build wheels for|Failed to build)\s+(?:" + _FLASH + "|" +
        _FLASH_PARTS + r")|"
        # kernels this GPU or dtype lacks: `FlashAttention backward for head dim > 192 requires A100/A800 or H100/H800`
        r".*?(?:" + _FLASH + r").{0,200}?\brequires? (?:an? )?(?:A100|A800|H100|H800|Ampere|Hopper|sm_?[89]\d)|"
        # its Triton kernel (flash_attn_triton.py, copied into MPT's and DNABERT-2's remote code) written for the
        # Triton API before 2.0, run on a newer Triton: `TypeError: dot() got an unexpected keyword argument 'trans_b'`
        r".*?" + TRITON_DOT + ")",
        re.I)),
    ("cuda_error", re.compile(
        # in a person's words the run failed with one (`crashes with a device-side assert`), not `I fixed the ...`
        r"CUDA (?:driver |runtime )?error: (?!out of memory)|device-side assert triggered|illegal memory access|"
        r"\b(?:with|gets?|got|getting|hits?|hitting|throws?|threw|raises?|raised|into)\s+(?:an?\s+|the\s+)?"
        r"device-side assert(?!ions\b)|"
        r"cudaError(?!MemoryAllocation)[A-Z]\w+|CUDA_ERROR_(?!OUT_OF_MEMORY)[A-Z_]+|HIP error: (?!out of memory)|"
        r"hipError(?!OutOfMemory)[A-Z]\w+|"
        r"CUBLAS_STATUS_(?!ALLOC_FAILED|SUCCESS)\w+|CUDNN_STATUS_(?!ALLOC_FAILED|SUCCESS)\w+|"
        # the other CUDA libraries' statuses (torch.fft's `cuFFT error: CUFFT_INTERNAL_ERROR`, linalg's cuSOLVER)
        r"CUFFT_(?!SUCCESS|ALLOC_FAILED)[A-Z]\w+|CU(?:SOLVER|SPARSE|RAND)_STATUS_(?!SUCCESS|ALLOC_FAILED)\w+|"
        # XLA's words for a cuSOLVER failure (`XlaRuntimeError: INTERNAL: cuSolver internal error`), and a CUDA call's
        # status checked by glog's CHECK in Caffe's and TensorFlow's C++ with its code (`Check failed: error ==
        # cudaSuccess (77 vs. 0)`, `(8 vs. 0) invalid device function`); code 2 is cudaErrorMemoryAllocation, an OOM
        r"\bcuSolver internal error\b|==\s*cudaSuccess\s*\((?!2 vs)\d+ vs\. 0\)|"
        r"Assertion `[^`]+` failed|NCCL error|cuda runtime error \(\d+\)|"
        # CUDA's error strings as C++ libraries print them, with the code (CatBoost's `CUDA error 719: unspecified
        # launch failure`) or alone (XGBoost's thrust `gpu_predictor.cu(322): unspecified launch failure`), and the
        # OpenCL runtime's, the GPU path of LightGBM (`Unknown OpenCL Error (221)`, `No OpenCL device found`)
        r"\bCUDA error \d+\s*[:(](?!\s*out of memory)|unspecified launch failure|"
        r"an illegal instruction was encountered|\bmisaligned address\b|launch timed out and was terminated|"
        r"too many resources requested for launch|\bOpenCL error\b|No OpenCL device found|\bcutlass error\b|"
        # torch's older THC words for a cuBLAS/cuDNN failure (`cublas runtime error : the GPU program failed to
        # execute`), and cuDNN v8's frontend that finds no kernel for a convolution (`GET was unable to find an engine
        # to execute this computation`: the wrong cuDNN library loaded, or none fits this GPU and shape)
        r"\bcu(?:blas|dnn) runtime error\b|\b(?:GET|FIND) was unable to find an engine\b|"
        # torch's words when cuBLAS(Lt) could not create its handle (ChatGLM-6B#465: a conda env's mismatched toolkit)
        r"\bLibrary cublas(?:Lt)? is not initialized\b|"
        # ROCm's runtime (HSA) when the GPU hangs or faults under a kernel (`HW Exception by GPU node-9 (Agent handle:
        # 0x63...) reason :GPU Hang`, `Memory access fault by GPU node-1 ... Reason: Page not present`,
        # `HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION`): the AMD side of a CUDA fault
        r"\b(?:HW Exception|Memory access fault) by GPU node-?\d+|HSA_STATUS_ERROR_(?!OUT_OF_RESOURCES)[A-Z_]+|"
        # a communicator aborted for a watchdog timeout is that timeout (nccl_timeout), not a CUDA fault
        r"NCCL communicator was aborted(?!.{0,300}?(?:timed? ?out|timeout))|"
        + cuda.SETUP, re.I)),
)
SETUP_WORDS = {"bnb_setup": ("bitsandbytes", "cuda setup", "nonetype", "ops.cu", "setup failed", "int8 matmul",
                             "needed for quantization", "cublas api"),
               "flash_attn_unavailable": ("flash", "memory_efficient_attention", "xformers", "is_sm", "layer-norm",
                                          "layer_norm", "rotary", "fused", "xentropy", "trans_"),
               "cuda_error": ("cuda", "cublas", "cudnn", "assert", "nccl", "illegal", "hip", "find an engine",
                              "by gpu node", "hsa_status", "launch", "misaligned", "opencl", "cutlass", "cufft",
                              "cusolver", "cusparse", "curand") +
               cuda.WORDS}
"""Words one of each id's patterns needs (lowercase): the patterns run only on lines that hold one."""
CUDA_BOILERPLATE = re.compile(r"CUDA kernel errors might be asynchronously reported")
"""What torch prints after every CUDA error: a CUDA error on its own when no OOM came before it."""
# -- ranks ----------------------------------------------------------------------------------------


def rank_imbalance(peaks: dict[int, int]) -> bool:
    """One rank holding far more than another (over 25 % and 1 GiB more)."""
    if len(peaks) < 2:
        return False
    high, low = max(peaks.values()), min(peaks.values())
    return high > 1.25 * low and high - low > GIB


class RankWatch:
    """Per-rank step peaks and longest sequences; an imbalance that holds for a few steps of every
    rank is a finding (the first steps of a rank can differ while its allocator warms up)."""

    PATIENCE = 3

    def __init__(self) -> None:
        self.peaks: dict[int, int] = {}
        self.lens: dict[int, int] = {}
        self.steps: dict[int, int] = {}

    def step(self, ctx: Context, e: events.Step) -> Finding | None:
        if e.peak_reserved is None:
            return None
        self.peaks[e.rank] = max(self.peaks.get(e.rank, 0), e.peak_reserved)
        self.lens[e.rank] = max(self.lens.get(e.rank, 0), e.max_len)
        self.steps[e.rank] = self.steps.get(e.rank, 0) + 1
        if min(self.steps.values()) < self.PATIENCE or not rank_imbalance(self.peaks):
            return None
        return Finding("rank_imbalance", ctx.step, {"peaks": dict(self.peaks), "lens": dict(self.lens)})
