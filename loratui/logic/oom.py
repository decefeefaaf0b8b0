"""Parsing CUDA out-of-memory messages into numbers and a cause: card full, fragmentation, or a neighbour.

PyTorch has printed two formats. The old one (before 2.1) puts everything in a parenthesis:
"Tried to allocate 512.00 MiB (GPU 0; 31.74 GiB total capacity; 30.20 GiB already allocated;
1.50 GiB free; 30.60 GiB reserved in total by PyTorch)". The new one spells it out: "Tried to allocate
2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.05 GiB is free. Process 4242 has 78.08 GiB
memory in use. Including non-PyTorch memory, this process has 78.08 GiB memory in use. Of the allocated
memory 70.21 GiB is allocated by PyTorch, and 6.95 GiB is reserved by PyTorch but unallocated."
Fields are read one by one so a reordered, truncated or rank-prefixed message still parses; numbers that
contradict each other are dropped (the cause becomes "unknown") rather than trusted. What a person writes about
an OOM (that one happened, its cause in their words) is read in logic/oom_words.py. Pure logic.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from loratui.units import GIB, KIB, MIB

MAX_BYTES = 1 << 42
"""4 TiB: no single GPU comes near; a larger figure is junk, not a measurement."""

FULL, FRAGMENTATION, OTHER_PROCESS, UNKNOWN = "full", "fragmentation", "other_process", "unknown"

_UNITS = {
    "b": 1, "byte": 1, "bytes": 1, "kib": KIB, "mib": MIB, "gib": GIB, "tib": 1 << 40,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "g": GIB, "m": MIB,
}
SIZE = r"(\d{1,15}(?:\.\d{1,6})?)\s*(bytes|byte|KiB|MiB|GiB|TiB|KB|MB|GB|TB|B)\b"
_XLA_SIZE = r"(\d{1,6}(?:\.\d{1,3})?)([GM])"
"""XLA's sizes on a TPU (`Used 87.08G of 30.75G hbm`): binary units, by their letter alone."""
_FIELDS = {
    "requested": re.compile(r"(?:Tried to allocate|(?:while trying|ran out of memory trying) to allocate) " + SIZE +
                            r"|failed to allocate \S{1,12} \(" + SIZE + r"\)" +
                            r"|\bUsed " + _XLA_SIZE + r" of \S+ hbm", re.I),
    "total": re.compile(SIZE + r" total capaci?ty|total capaci?ty of " + SIZE + r"|\bUsed \S+ of " + _XLA_SIZE + " hbm",
                        re.I),
    "free": re.compile(r"of which " + SIZE + r" is free|" + SIZE + r" free\b", re.I),
    "allocated": re.compile(SIZE + r" (?:already allocated|is allocated by PyTorch)", re.I),
    "reserved": re.compile(SIZE + r" reserved in total by PyTorch", re.I),
    "cached": re.compile(SIZE + r" cached\b", re.I),
    "allowed": re.compile(SIZE + r" allowed\b", re.I),
    "reserved_unallocated": re.compile(SIZE + r" is reserved by PyTorch but unallocated", re.I),
    "process_used": re.compile(r"this process has " + SIZE + r" memory in use", re.I),
}
_GPU = re.compile(r"\(GPU (\d{1,3});|GPU (\d{1,3}) has a total capacity", re.I)
_PROCESS = re.compile(r"Process (\d{1,10}) has " + SIZE + r" memory in use", re.I)
_RANK = re.compile(r"\[(?:rank|Rank |RANK )(\d{1,5})\]")
_OOM = re.compile(
    r"Tried to allocate|CUDA out of memory|CUDA error: out of memory|OutOfMemoryError"
    r"|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY|hipErrorOutOfMemory|(?:CUBLAS|CUDNN|CUSPARSE|CUFFT|"
    r"CUSOLVER)_STATUS_ALLOC_FAILED"
    r"|\b(?:THC\w*|cuda\w*|CUDNN\w*|GPU|HIP|hip\w*)\b.{0,300}?\bout of memory\b"
    r"|OOM when allocating tensor|RESOURCE[_ ]EXHAUSTED:?\s*(?:Out of memory|Failed to allocate)"
    r"|Ran out of memory in memory space (?:hbm|vmem)|Exceeded hbm capacity"
    r"|Out of memory error on GPU|Allocator \(GPU\w*\) ran out of memory trying to allocate"
    r"|bfc_allocator\.cc:\d+\] Ran out of memory trying to allocate"
    r"|(?:cuda|rocm)_driver\.cc:\d+\] failed to allocate"
    r"|kIOGPUCommandBufferCallbackErrorOutOfMemory|\[METAL\][^\n]{0,80}Insufficient Memory"
    r"|No available memory for the cache blocks|Free memory on device\b[^\n]{0,40}on startup is less than desired"
    r"|memory capacity is unbalanced|MPS backend out of memory|XPU out of memory"
    r"|^\s*(?:[\w.]+\.)?ResourceExhaustedError\s{2,}Traceback \(most recent call last\)", re.I)
"""Every era's wording: PyTorch 2's OutOfMemoryError, 1.x's "CUDA out of memory", Lua Torch and PyTorch 0.x's
`THCudaCheck FAIL file=... error=2 : out of memory` and `cuda runtime error (2) : out of memory`; TensorFlow's
`ResourceExhaustedError: OOM when allocating tensor with shape[...] ... device:GPU:0` and XLA's (JAX)
`RESOURCE_EXHAUSTED: Out of memory while trying to allocate 2.00GiB` or `RESOURCE_EXHAUSTED: Failed to allocate request
for 3.00GiB`, and on a TPU when it compiles (`XLA:TPU compile permanent error. Ran out of memory in memory space hbm.
Used 87.08G of 30.75G hbm`), ROCm's `HIP out of memory` and `hipErrorOutOfMemory`, the CUDA libraries'
`*_STATUS_ALLOC_FAILED` (a handle or workspace that could not be allocated), TensorFlow 1's driver `cuda_driver.cc:806]
failed to allocate 7.63G` (ROCm's `rocm_driver.cc`); Apple's Metal (MLX) `[METAL] Command buffer execution failed:
Insufficient Memory`; vLLM's `No available memory for the cache blocks`; Paddle's `Out of memory error on GPU 0.
Cannot allocate 25.002197MB memory on GPU 0`; Apple's `MPS backend out of memory` and Intel's `XPU out of memory`
(PyTorch's other devices, read in their own terms: see `device`); and a notebook's traceback headed by TensorFlow's
`ResourceExhaustedError` (IPython prints the type first: `ResourceExhaustedError    Traceback (most recent call last)`),
whose message a paste often cuts off."""
SLURM_OOM = re.compile(r"\bsrun: error: .{0,200}?: tasks? [\d,-]+: Out Of Memory|cgroup out-of-memory handler|"
                       r"oom-kill event|\bexceeded (?:job |step )?memory limit\b|"
                       r"(?<!GPU )(?<!CUDA )(?<!VRAM )(?<!device )\b(?:job |step )?memory limit (?:was )?exceeded\b",
                       re.I)
"""Slurm's word that a job went over its --mem (srun's `task 0: Out Of Memory`, slurmstepd's `Detected 1 oom-kill
event(s) in StepId=147.0 ... killed by the cgroup out-of-memory handler`, older slurmstepd's `Job 42 exceeded memory
limit (9000000 > 8192000), being killed` and `Exceeded job memory limit`, as people retell it `memory limit
exceeded`): the host's RAM, never a GPU's."""
KERNEL_OOM = re.compile(r"\bOut of memory: Kill(?:ed)? process \d+|"
                        r"\bKilled process \d+ \([^)\n]{1,40}\) total-vm", re.I)
"""The Linux kernel's OOM killer in the system log (`kernel: Out of memory: Kill process 126138 (python3) score 939 or
sacrifice child`, `Killed process 126170 (python3) total-vm:325690732kB`): the host's RAM, never a GPU's."""
LUAJIT_OOM = (r"(?:PANIC: unprotected error in call to Lua API|THREAD PANIC: \(\w+\)|\bluajit:|\[thread \d+ callback\]"
              r"[^\n]{0,200}?|\.lua:\d+:)\s*\(?not enough memory\b")
"""LuaJIT's own memory error, Lua's `not enough memory` (`PANIC: unprotected error in call to Lua API (not enough
memory)`, `FATAL THREAD PANIC: (pcall) not enough memory`, `[thread 1 callback] .../data.lua:326: not enough memory`):
Lua Torch7's interpreter heap, whose limit (1-2 GB in older LuaJIT builds) lies far below the machine's RAM, never
the GPU's (R35)."""
RUNTIME_OOM = (LUAJIT_OOM + r"|\bjava(?:\.lang\.|\s+)OutOfMemoryError|\bJava heap space\b|"
               r"\bray\.exceptions\.OutOfMemoryError|\bnode running low on memory\b|\bRayOutOfMemoryError\b|"
               r"\b\d+% of the memory on node\b|_ArrayMemoryError\b|"
               r"\bUnable to allocate \d[\d.]*\s?[KMGTP]i?B for an array with shape\b")
"""Another runtime's out-of-memory error, named like torch's: LuaJIT's (LUAJIT_OOM), the JVM's
(`java.lang.OutOfMemoryError: Java heap space`), Ray's memory monitor's (`ray.exceptions.OutOfMemoryError: Task was
killed due to the node running low on memory`; before Ray 2, `RayOutOfMemoryError: More than 95% of the memory on
node ... is used`) and NumPy's (`_ArrayMemoryError: Unable to allocate 960. GiB for an array with shape ...`, an array
in the host's RAM): the host's RAM, never a GPU's (oom_words.HOST_ALLOCATOR reads them as the host's)."""
_NOT_CUDA = re.compile(r"DefaultCPUAllocator|device:CPU|not a failure|" + KERNEL_OOM.pattern + "|" + RUNTIME_OOM + "|"
                       r"\[W\d{3,4}\s[^\]]{0,40}CUDACachingAllocator\.cpp:\d+\]\s*memory allocation failed|" +
                       SLURM_OOM.pattern, re.I)
"""Not a device's memory, or no failure: TensorFlow's BFC allocator warns `ran out of memory trying to allocate
... The caller indicates that this is not a failure`; PyTorch's caching allocator warns (`[W812 16:00:28.64
CUDACachingAllocator.cpp:3933] memory allocation failed with OOM on device 1 ...`) on a cudaMalloc it retries after
freeing its cache, which then succeeds (pytorch#193195: routine noise under vLLM, made INFO by #193391); a Slurm job
over its --mem (SLURM_OOM): its log read as a CUDA OOM, "lower the batch size" (trial 14)."""
_MPS = re.compile(r"MPS backend out of memory|PYTORCH_MPS_HIGH_WATERMARK_RATIO|\bMPS allocated:", re.I)
_XPU = re.compile(r"XPU out of memory", re.I)
_TPU = re.compile(r"XLA:TPU|memory space hbm|Exceeded hbm capacity", re.I)
"""A TPU's memory (HBM) in XLA's words: no CUDA, none of PyTorch's allocator settings."""
_METAL = re.compile(r"\[METAL\]|kIOGPUCommandBuffer|\[malloc_or_wait\]", re.I)
"""Apple's Metal reached outside PyTorch (MLX: `[METAL] Command buffer execution failed: Insufficient Memory`, its
allocator's `[malloc_or_wait] Unable to allocate`): a Mac's GPU, with no CUDA and none of PyTorch's MPS settings."""
_MPS_SIZES = re.compile(r"MPS allocated: " + SIZE + r", other allocations: " + SIZE + r"(?:, max allowed: " + SIZE + ")?",
                        re.I)
"""PyTorch's MPS allocator (aten/src/ATen/mps/MPSAllocator.mm): `MPS backend out of memory (MPS allocated: 11.14 GB,
other allocations: 6.65 GB, max allowed: 18.13 GB). Tried to allocate 375.40 MB on private pool.`: the heaps PyTorch
holds (its cache included), the device's other Metal allocations, and the cap PYTORCH_MPS_HIGH_WATERMARK_RATIO sets
(absent when the ratio is 0.0, no cap)."""
_JUNK = -1
_SLACK = 64 * MIB
"""Rounding slack: the message prints sizes to two decimals of their unit."""


@dataclass(frozen=True)
class OomReport:
    """One CUDA OOM message: sizes in bytes (None when the message does not give them) and its cause."""

    kind: str
    """FULL, FRAGMENTATION, OTHER_PROCESS, or UNKNOWN when the message has no usable numbers."""
    text: str
    gpu: int | None = None
    rank: int | None = None
    requested: int | None = None
    total: int | None = None
    free: int | None = None
    allocated: int | None = None
    reserved: int | None = None
    reserved_unallocated: int | None = None
    process_used: int | None = None
    cached: int | None = None
    """PyTorch before 1.4 printed "N cached": the whole cache, or (1.0) only its unused part."""
    allowed: int | None = None
    """"N allowed": the cap set by torch.cuda.set_per_process_memory_fraction."""
    processes: tuple[tuple[int, int], ...] = ()
    """(pid, bytes) of every "Process N has X memory in use" the message lists."""
    note: str = ""
    held: bool = False
    """The note says, from numbers outside the OOM's message, that memory was held outside the program before it
    allocated any (a server's start check, a refused start pool, the card's free memory at start)."""
    said: bool = False
    """Only the person's words name the OOM (`I also met the OOM error in validation`): no message, no numbers."""

    @property
    def device(self) -> str:
        """"mps" (PyTorch on Apple's Metal), "metal" (Apple's Metal outside PyTorch: MLX), "xpu" (Intel's GPUs), "tpu"
        (Google's TPUs, in XLA's words) or
        "cuda" (CUDA, ROCm and the other frameworks' GPUs), from the message's words: each device has its own settings
        and tools."""
        return "mps" if _MPS.search(self.text) else "metal" if _METAL.search(self.text) else \
            "xpu" if _XPU.search(self.text) else "tpu" if _TPU.search(self.text) else "cuda"

    @property
    def other_used(self) -> int | None:
        """Bytes in use on the card by anything but this process's PyTorch allocator, when known."""
        if self.total is None or self.free is None or self.allowed is not None:
            return None  # under a memory fraction, the cap, not a neighbour, is what was hit
        mine = self.process_used if self.process_used is not None else self.reserved
        return None if mine is None else max(0, self.total - self.free - mine)

    @property
    def other_pids(self) -> tuple[tuple[int, int], ...]:
        """The listed processes other than this one (the one whose use matches "this process has")."""
        if len(self.processes) < 2 or self.process_used is None:
            return ()
        own = min(self.processes, key=lambda p: abs(p[1] - (self.process_used or 0)))
        return tuple(p for p in self.processes if p != own)


def parse_size(number: str, unit: str) -> int | None:
    """Bytes for "512.00" "MiB"; None for an unknown unit or a size beyond any GPU."""
    scale = _UNITS.get(unit.lower())
    if scale is None:
        return None
    value = int(float(number) * scale)
    return value if value <= MAX_BYTES else None


def cut_phrase(prev: str, line: str) -> str:
    """The two lines joined, when a wrap cut an OOM's wording between them (`Resource exhausted: Out` / `of memory
    while trying to allocate`): neither names it alone, the joined text does across the cut; '' otherwise."""
    head = line.lstrip()[:40].lower()
    if not any(word in head for word in ("mem", "alloc", "oom", "exhaust", "error", "of ")) or len(prev) > 2000 or \
            is_oom_line(prev):
        return ""  # the cheap test first: the second line opens with the rest of the wording
    joined = prev.rstrip() + " " + line.strip()
    cut = len(prev.rstrip())
    for found in _OOM.finditer(joined):
        if found.start() < cut < found.end() and found.end() - found.start() <= 80 and not _NOT_CUDA.search(joined):
            return joined
    return ""


def not_a_device(line: str) -> bool:
    """Whether a line's out-of-memory is no GPU's (the CPU allocator's, a Slurm job's --mem) or no failure."""
    return bool(_NOT_CUDA.search(line))


def is_oom_line(line: str) -> bool:
    """Whether a line reports a GPU's out-of-memory error (CUDA's, MPS's, XPU's; not the CPU allocator's)."""
    lowered = line.lower()
    if "memory" not in lowered and "alloc" not in lowered and "exhausted" not in lowered:
        return False  # a cheap test first: this runs on every line of a log
    return bool(_OOM.search(line)) and not _NOT_CUDA.search(line)


_SERVER_START = re.compile(r"Free memory on device\b[^(\n]{0,30}\((\d{1,6}(?:\.\d{1,3})?)/(\d{1,6}(?:\.\d{1,3})?) GiB\) "
                           r"on startup", re.I)
"""vLLM's check before it allocates anything: `ValueError: Free memory on device (59.32/79.15 GiB) on startup is less
than desired GPU memory utilization (0.9, 71.24 GiB). Decrease GPU memory utilization or reduce GPU memory used by
other processes.`: the card's free and total memory before the server held any."""
_UNBALANCED = re.compile(r"memory capacity is unbalanced", re.I)
"""SGLang's check at start: `The memory capacity is unbalanced. Some GPUs may be occupied by other processes.`"""


def _server_start(line: str) -> OomReport | None:
    """The report of an inference server's memory check at start: memory held before it allocated anything is
    another process's; None when the line is no such check."""
    found = _SERVER_START.search(line)
    if found is not None:
        free, total = parse_size(found.group(1), "GiB"), parse_size(found.group(2), "GiB")
        if free is not None and total is not None and free <= total:
            held = held_before(total, free)
            return OomReport(kind=OTHER_PROCESS if held else UNKNOWN, text=line.strip()[:600], total=total, free=free,
                             note=f"only {gib(free)} of {gib(total)} was free when the server started" if held else "",
                             held=held)
    if _UNBALANCED.search(line):
        return OomReport(kind=OTHER_PROCESS, text=line.strip()[:600], note="the server found the cards' free memory "
                         "unbalanced at start", held=True)
    return None


def parse_oom(line: str) -> OomReport | None:
    """The OOM report in one line of output, or None when the line is not a CUDA OOM."""
    if not is_oom_line(line):
        return None
    started = _server_start(line) if "startup" in line or "unbalanced" in line else None
    if started is not None:
        return started
    if _MPS.search(line):
        return _mps(line)
    sizes = {name: _first_size(rx, line) for name, rx in _FIELDS.items()}
    if sizes["requested"] is None:
        sizes["requested"] = tensor_bytes(line)
    junk = any(value == _JUNK for value in sizes.values())
    clean = {name: (None if value == _JUNK else value) for name, value in sizes.items()}
    report = OomReport(kind=UNKNOWN, text=line.strip()[:600], gpu=_gpu(line), rank=_rank(line),
                       processes=_processes(line), **clean)  # type: ignore[arg-type]
    report = _complete(report)
    problem = "a size beyond any GPU" if junk else _inconsistency(report)
    if problem:
        return OomReport(kind=UNKNOWN, text=report.text, gpu=report.gpu, rank=report.rank, note=problem)
    kind = classify(report)
    if kind == UNKNOWN and _CONTEXT.search(line):
        return replace(report, kind=OTHER_PROCESS, note=CONTEXT_NOTE)
    return replace(report, kind=kind)


def _mps(line: str) -> OomReport:
    """An MPS OOM: PyTorch's heaps as what it reserved, with the other Metal allocations as the process's use, and the
    cap as what it may use. The cap reached (or, with none, the Mac's memory itself) is the whole story the message
    tells: a full device."""
    sizes = _MPS_SIZES.search(line)
    found = sizes.groups() if sizes else (None,) * 6  # (number, unit) of MPS allocated, other allocations, max allowed
    ours, other, cap = (parse_size(found[i], found[i + 1]) if found[i] else None for i in (0, 2, 4))
    requested = _first_size(_FIELDS["requested"], line)
    return OomReport(kind=FULL if ours is not None and other is not None else UNKNOWN, text=line.strip()[:600],
                     requested=None if requested == _JUNK else requested, reserved=ours,
                     process_used=ours + other if ours is not None and other is not None else None, allowed=cap)


_TENSOR = re.compile(r"OOM when allocating tensor with shape\s*\[(?P<dims>[\d, ]{1,80})\] and type (?P<type>\w+)", re.I)
_DTYPE_BYTES = {"float": 4, "float32": 4, "int32": 4, "uint32": 4, "half": 2, "float16": 2, "bfloat16": 2, "int16": 2,
                "double": 8, "float64": 8, "int64": 8, "uint64": 8, "int8": 1, "uint8": 1, "bool": 1}


def tensor_bytes(line: str) -> int | None:
    """The size TensorFlow asked for, from its tensor's shape and type (`OOM when allocating tensor with
    shape[32,512,512,64] and type float`: 2 GiB); None where it names neither."""
    match = _TENSOR.search(line)
    width = _DTYPE_BYTES.get(match.group("type").lower()) if match else None
    dims = [int(d) for d in match.group("dims").replace(" ", "").split(",") if d] if match else []
    return math.prod(dims) * width if width and dims else None


_CONTEXT = re.compile(r"cuDevicePrimaryCtxRetain|cuCtxCreate|failed initializing StreamExecutor|"
                      r"(?:creat\w*|initiali[sz]\w*|init) (?:a |the )?(?:CUDA |primary |device )*context|"
                      r"CUDA context.{0,40}(?:creat|initiali[sz])", re.I)
"""The driver could not create the process's CUDA context (TensorFlow's `failed call to cuDevicePrimaryCtxRetain:
CUDA_ERROR_OUT_OF_MEMORY`): the program held no memory yet, so what filled the card is outside it."""
CONTEXT_NOTE = "the CUDA context could not be created: the card was full before this program held any memory"


_CUDA_START = frozenset({"_lazy_init", "_cuda_init", "cudaSetDevice", "_cuda_setDevice", "init_process_group",
                         "_new_process_group_helper"})
"""torch.cuda's lazy initialisation (`torch._C._cuda_init()`, run by the first CUDA call or set_device) and the
process group's start (each rank's NCCL context, on the first card when no rank set its device): they create
contexts and allocate nothing of the model's."""


def cuda_starting(names: list[str]) -> bool:
    """Whether the innermost frames' functions and calls (`_lazy_init`, `torch._C._cuda_init()`) say the OOM struck
    while CUDA started: the context could not be created, the card was full before this program held anything."""
    return any(name.rsplit(".", 1)[-1] in _CUDA_START for name in names)


def context_failed(line: str) -> bool:
    """Whether a line says the CUDA context could not be created (a driver's stack frame `cuCtxCreate` counts)."""
    return bool(_CONTEXT.search(line) or "cuCtxCreate" in line)


def held_before(total: int, free: int) -> bool:
    """Whether the card's memory held before this program allocated anything is others' real share (beyond a
    display's few hundred MiB): the same floor as an old-format message's other use."""
    return total - free >= max(2 * GIB, total // 10)


_OPEN_OLD = re.compile(r"\(GPU \d{1,3};[^)]*$")
_OPEN_NEW = re.compile(r"total capaci?ty(?: of |\s*$)|\bGPU \d{1,3} has a\b|Tried to allocate [^(]{0,40}\.\s*GPU\b",
                       re.I)
"""The new format's opening, wherever a wrap cut it (`... has a total capacity` at a line's end)."""
_MESSAGE_WORDS = re.compile(r"\b(?:memory|PyTorch|process|allocat\w*|reserved|capaci?ty|free|in use|GiB|MiB|"
                            r"unallocated|Including|which)\b", re.I)
"""A wrapped line of the message that adds no whole number yet (`non-PyTorch memory, this process`)."""
_MESSAGE_PARTS = 6
"""A message is wrapped over a few lines at most (issue text hard-wrapped at 80-120 columns)."""


def message_open(text: str) -> bool:
    """Whether an OOM message stops before its numbers end: the text was wrapped (a console's width, a paste
    hard-wrapped in an issue) and the next line goes on with it. The old format's parenthesis is not closed;
    the new format's last sentence (what PyTorch reserved but did not allocate) has not come; or only the
    request came."""
    if _MPS.search(text):
        return "Tried to allocate" not in text  # its request closes the message
    if "Tried to allocate" in text and "capaci" not in text.lower():
        return True
    if _OPEN_OLD.search(text):
        return True
    return bool(_OPEN_NEW.search(text)) and "unallocated" not in text.lower()


def continued(text: str, line: str) -> str | None:
    """The OOM message `text` with the wrapped `line` after it, when the line goes on with its numbers (the
    joined message reads more of them); None when the line is something else."""
    if len(text) > 600 * _MESSAGE_PARTS or not line.strip() or "File " in line or "Traceback" in line:
        return None
    spaced, glued = text.rstrip() + " " + line.strip(), text.rstrip() + line.strip()  # glued: a word cut in two
    joined = max((spaced, glued), key=_known)
    if _known(joined) > _known(text):
        return joined
    # a piece between two numbers (`Including` / `non-PyTorch memory, this process` / `has 19.80 GiB memory in use`)
    return spaced if message_open(text) and len(line) < 200 and _MESSAGE_WORDS.search(line) else None


def _known(text: str) -> int:
    """How many of the message's numbers a text gives (each listed process counts)."""
    return sum(rx.search(text) is not None for rx in _FIELDS.values()) + len(_PROCESS.findall(text))


def classify(report: OomReport) -> str:
    """The cause: another process holds the card, the cache is fragmented, or the card is full."""
    if report.total is None and report.allocated is not None and report.reserved_unallocated is not None and \
            report.requested is not None and report.reserved_unallocated >= max(report.requested, GIB):
        return FRAGMENTATION  # the card's total lost from the paste: the cache alone held the request, in no block
    if report.total is not None and report.requested is not None and report.requested > report.total:
        return FULL  # the request alone is larger than the card: no neighbour nor cache is to blame
    if report.total is None or (report.allocated is None and report.process_used is None):
        return UNKNOWN
    if _other_process(report):
        return OTHER_PROCESS
    if _fragmented(report):
        return FRAGMENTATION
    return FULL


def _other_process(report: OomReport) -> bool:
    """Others use a large share: new messages count this process exactly, old ones leave its context out."""
    total = report.total or 0
    other, listed = report.other_used, sum(b for _, b in report.other_pids)
    if _fits_nowhere(report, max(other or 0, listed)):
        return False
    if listed >= max(GIB, total // 20):
        return True
    if other is None:
        return False
    # The old format (before the message named this process's own use) omits this process's own CUDA context, which
    # before CUDA's lazy module loading (torch 1.13 and CUDA 11.7 made it the default) held every kernel of torch,
    # cuDNN and cuBLAS: 1-3 GiB, more beside a desktop's display on a consumer card. Below 3 GiB, and short of half
    # the card, the numbers alone cannot tell a neighbour from that (in the dev split's old-format messages, 2-3 GiB
    # outside PyTorch was the run's own 22 times, a neighbour's twice).
    if report.process_used is None:
        return other >= max(2 * GIB, total // 10) and (other >= 3 * GIB or other >= total // 2)
    return other >= max(GIB + GIB // 2, total // 20)


def _fits_nowhere(report: OomReport, others: int) -> bool:
    """Whether the request would not have fit even with the neighbours gone: larger than the card's free memory, what
    they hold and the cache's unused blocks together (Restormer asking 7.62 GiB of a 12 GiB card with 4.64 GiB free
    and 2 GiB outside PyTorch). Then the work is too large for the card, and stopping another process is no fix."""
    if report.requested is None or report.free is None:
        return False
    return report.requested > report.free + others + (report.reserved_unallocated or 0)


def words_settle(report: OomReport, said: str) -> bool:
    """Whether the person's words (another process held the card) settle what the numbers leave open: a full card
    by the numbers on which memory outside this process is still a real amount (from 1 GiB beside the new format's
    exact count of this process, 1.5 GiB beside the old one's, which leaves its CUDA context out), short of the share
    that reads as a neighbour by the numbers alone. Where this process held all but its context, the words are of
    another time than this message and the numbers stand."""
    if said != OTHER_PROCESS or report.kind != FULL or report.other_used is None:
        return False
    return report.other_used >= (GIB if report.process_used is not None else GIB + GIB // 2)


def others_to_blame(report: OomReport, others: list[tuple[int, int]]) -> bool:
    """Whether the processes seen on the card (NVML's list, or the PIDs the message names) explain the OOM.
    Not when the card still had the requested memory free (this process hit its own cap, "N allowed"), nor
    for a neighbour's bare CUDA context (under 1 GiB): on the H200 a 0.5 GiB context of another process
    turned a cap-reached OOM into 'other processes hold the card' and the guard did nothing. Nor when the request
    would not have fit with them gone (`_fits_nowhere`): stopping them is then no fix."""
    held = sum(b for _, b in others) or sum(b for _, b in report.other_pids)
    if held < GIB:
        return False
    if report.free is not None and report.requested is not None:
        # the card itself was short: what others hold matters, if it could have made the difference
        return report.free < report.requested and not _fits_nowhere(report, held)
    return report.allowed is None


def _fragmented(report: OomReport) -> bool:
    """The cache's unused blocks are a real share of the card and could have served the request; or, for a
    request a little larger than them (they hold 90% of it, or they are a tenth of the card), they and the free
    memory together could have; or the card's free memory held the request and a real share more; or the cache
    holds half as much unused as allocated. Then expandable segments are the fix."""
    spare, total = report.reserved_unallocated, report.total
    if spare is None or total is None:
        return False
    requested, free, allocated = report.requested or 0, report.free or 0, report.allocated or 0
    share, small = max(512 * MIB, total // 20), max(512 * MIB, total // 40)
    if requested >= spare + free + max(GIB, total // 20):
        return False  # the cache's unused blocks and the card's free memory together fall well short of the request
        # (77 GiB asked of a 39 GiB card): no allocator setting serves it, the work itself is too large
    if report.cached is not None and report.reserved_unallocated == report.cached:
        # PyTorch before 1.4 ("N cached"): no expandable segments nor max_split_size_mb existed, the only remedy
        # was a smaller batch; a cache slack under a tenth of the card is read as the full card it was answered as.
        share = small = max(GIB, total // 10)
    if spare >= requested and spare >= share:
        return True
    # A smaller unused cache (from 2.5% of the card) that held a request of at least a quarter of it: the failed
    # block was a big one the holes could have held, and holes that size are whole 2 MiB pages an expandable
    # segment reclaims; a tiny request failing beside a cache many times its size says the holes are tiny.
    if spare >= requested >= spare // 4 and spare >= small:
        return True
    # The card's free memory alone held the request with room to spare: not full, the memory was there but
    # no block of it could be had (under a memory-fraction cap, "allowed", the cap is what was hit).
    if free >= requested + share and report.allowed is None:
        return True
    if requested > spare >= GIB and spare + free >= requested and 10 * spare >= 9 * requested:
        return True
    # The cache's unused blocks are a tenth of the card, beyond the slack of a full card's cache (under 5% in
    # every full-card message seen), and with the free memory they held the request: one expandable segment
    # could have.
    if requested > spare >= max(GIB, total // 10) and spare + free >= requested:
        return True
    return 2 * spare >= allocated and spare >= max(GIB, share)


def _complete(report: OomReport) -> OomReport:
    """Derive reserved from the new format's parts and the spare cache from the old format's; a process use
    below what PyTorch itself reserved is a blind count (in a container the driver cannot see the process:
    "this process has 0 bytes memory in use"), so it is dropped and the reserved memory counts instead."""
    report = _derived(report)
    used, reserved = report.process_used, report.reserved
    if used is not None and reserved is not None and used + _SLACK < reserved:
        return replace(report, process_used=None,
                       note=f"this process's use reads {gib(used)} below PyTorch's own {gib(reserved)} (a "
                            "container hides the process from the driver): PyTorch's reserved memory counts instead")
    return report


def _derived(report: OomReport) -> OomReport:
    if report.cached is not None and report.reserved is None:
        # "N cached" below the allocated figure can only be the unused part of the cache (PyTorch 1.0).
        if report.allocated is not None and report.cached < report.allocated:
            report = replace(report, reserved_unallocated=report.cached)
        else:
            report = replace(report, reserved=report.cached)
    if report.reserved is None and report.allocated is not None and report.reserved_unallocated is not None:
        return replace(report, reserved=report.allocated + report.reserved_unallocated)
    if report.reserved_unallocated is None and report.allocated is not None and report.reserved is not None:
        return replace(report, reserved_unallocated=max(0, report.reserved - report.allocated))
    return report


def _inconsistency(r: OomReport) -> str:
    """Why the numbers cannot all be true, or ''."""
    if r.total is not None and r.total <= 0:
        return "total capacity is zero"
    parts = {"free": r.free, "allocated": r.allocated, "reserved": r.reserved, "this process": r.process_used}
    for name, value in parts.items():
        if value is not None and r.total is not None and value > r.total + _SLACK:
            return f"{name} exceeds the total capacity"
    if r.allocated is not None and r.reserved is not None and r.allocated > r.reserved + _SLACK:
        return "allocated exceeds reserved"
    if r.total is not None and r.free is not None and r.process_used is not None:
        if r.free + r.process_used > r.total + _SLACK:
            return "free plus this process's use exceeds the total capacity"
    return ""


def _first_size(rx: re.Pattern[str], line: str) -> int | None:
    """The field's size in bytes, None when absent, _JUNK when present but not believable."""
    match = rx.search(line)
    if not match:
        return None
    groups = [g for g in match.groups() if g is not None]
    size = parse_size(groups[0], groups[1]) if len(groups) >= 2 else None
    return _JUNK if size is None else size


def _gpu(line: str) -> int | None:
    match = _GPU.search(line)
    return int(match.group(1) or match.group(2)) if match else None


def _rank(line: str) -> int | None:
    match = _RANK.search(line)
    return int(match.group(1)) if match else None


def _processes(line: str) -> tuple[tuple[int, int], ...]:
    found = []
    for match in _PROCESS.finditer(line):
        size = parse_size(match.group(2), match.group(3))
        if size is not None:
            found.append((int(match.group(1)), size))
    return tuple(found[:32])


def gib(value: int | None) -> str:
    """Bytes as "12.34 GiB", under a GiB as "20.00 MiB", under a MiB as "480.00 KiB" or "256 bytes", as PyTorch prints
    them (not "0.02 GiB", and not "0.00 MiB" for an MPS request of 256 bytes), or "?" when unknown."""
    if value is None:
        return "?"
    if abs(value) < KIB:
        return f"{value} bytes"
    return f"{value / GIB:.2f} GiB" if abs(value) >= GIB else f"{value / MIB:.2f} MiB" if abs(value) >= MIB else \
        f"{value / KIB:.2f} KiB"
