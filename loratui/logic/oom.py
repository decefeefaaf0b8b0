"""Parsing CUDA out-of-memory messages into numbers and a cause: card full, fragmentation, or a neighbour.

PyTorch has printed two formats. The old one (before 2.1) puts everything in a parenthesis:
"Tried to allocate 512.00 MiB (GPU 0; 31.74 GiB total capacity; 30.20 GiB already allocated;
1.50 GiB free; 30.60 GiB reserved in total by PyTorch)". The new one spells it out: "Tried to allocate
2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.05 GiB is free. Process 4242 has 78.08 GiB
memory in use. Including non-PyTorch memory, this process has 78.08 GiB memory in use. Of the allocated
memory 70.21 GiB is allocated by PyTorch, and 6.95 GiB is reserved by PyTorch but unallocated."
Fields are read one by one so a reordered, truncated or rank-prefixed message still parses; numbers that
contradict each other are dropped (the cause becomes "unknown") rather than trusted. Pure logic.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from loratui.logic.clauses import denial, sentences
from loratui.logic.oom_holders import CARD_SWAP, CLOSED_OTHER, someone_else
from loratui.units import GIB, KIB, MIB

MAX_BYTES = 1 << 42
"""4 TiB: no single GPU comes near; a larger figure is junk, not a measurement."""

FULL, FRAGMENTATION, OTHER_PROCESS, UNKNOWN = "full", "fragmentation", "other_process", "unknown"

_UNITS = {
    "b": 1, "byte": 1, "bytes": 1, "kib": KIB, "mib": MIB, "gib": GIB, "tib": 1 << 40,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "g": GIB, "m": MIB,
}
_SIZE = r"(\d{1,15}(?:\.\d{1,6})?)\s*(bytes|byte|KiB|MiB|GiB|TiB|KB|MB|GB|TB|B)\b"
_FIELDS = {
    "requested": re.compile(r"(?:Tried to allocate|(?:while trying|ran out of memory trying) to allocate) " + _SIZE +
                            r"|failed to allocate \S{1,12} \(" + _SIZE + r"\)", re.I),
    "total": re.compile(_SIZE + r" total capaci?ty|total capaci?ty of " + _SIZE, re.I),
    "free": re.compile(r"of which " + _SIZE + r" is free|" + _SIZE + r" free\b", re.I),
    "allocated": re.compile(_SIZE + r" (?:already allocated|is allocated by PyTorch)", re.I),
    "reserved": re.compile(_SIZE + r" reserved in total by PyTorch", re.I),
    "cached": re.compile(_SIZE + r" cached\b", re.I),
    "allowed": re.compile(_SIZE + r" allowed\b", re.I),
    "reserved_unallocated": re.compile(_SIZE + r" is reserved by PyTorch but unallocated", re.I),
    "process_used": re.compile(r"this process has " + _SIZE + r" memory in use", re.I),
}
_GPU = re.compile(r"\(GPU (\d{1,3});|GPU (\d{1,3}) has a total capacity", re.I)
_PROCESS = re.compile(r"Process (\d{1,10}) has " + _SIZE + r" memory in use", re.I)
_RANK = re.compile(r"\[(?:rank|Rank |RANK )(\d{1,5})\]")
_OOM = re.compile(
    r"Tried to allocate|CUDA out of memory|CUDA error: out of memory|OutOfMemoryError"
    r"|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY|hipErrorOutOfMemory|(?:CUBLAS|CUDNN|CUSPARSE|CUFFT|"
    r"CUSOLVER)_STATUS_ALLOC_FAILED"
    r"|\b(?:THC\w*|cuda\w*|CUDNN\w*|GPU|HIP|hip\w*)\b.{0,300}?\bout of memory\b"
    r"|OOM when allocating tensor|RESOURCE[_ ]EXHAUSTED:?\s*(?:Out of memory|Failed to allocate)"
    r"|Out of memory error on GPU|Allocator \(GPU\w*\) ran out of memory trying to allocate"
    r"|bfc_allocator\.cc:\d+\] Ran out of memory trying to allocate"
    r"|(?:cuda|rocm)_driver\.cc:\d+\] failed to allocate"
    r"|kIOGPUCommandBufferCallbackErrorOutOfMemory|\[METAL\][^\n]{0,80}Insufficient Memory"
    r"|No available memory for the cache blocks|Free memory on device\b[^\n]{0,40}on startup is less than desired"
    r"|memory capacity is unbalanced", re.I)
"""Every era's wording: PyTorch 2's OutOfMemoryError, 1.x's "CUDA out of memory", Lua Torch and PyTorch 0.x's
`THCudaCheck FAIL file=... error=2 : out of memory` and `cuda runtime error (2) : out of memory`; TensorFlow's
`ResourceExhaustedError: OOM when allocating tensor with shape[...] ... device:GPU:0` and XLA's (JAX)
`RESOURCE_EXHAUSTED: Out of memory while trying to allocate 2.00GiB` or `RESOURCE_EXHAUSTED: Failed to allocate request
for 3.00GiB`, ROCm's `HIP out of memory` and `hipErrorOutOfMemory`, the CUDA libraries' `*_STATUS_ALLOC_FAILED` (a
handle or workspace that could not be allocated), TensorFlow 1's driver `cuda_driver.cc:806]
failed to allocate 7.63G` (ROCm's `rocm_driver.cc`); Apple's Metal (MLX) `[METAL] Command buffer execution failed:
Insufficient Memory`; vLLM's `No available memory for the cache blocks`; Paddle's `Out of memory error on GPU 0.
Cannot allocate 25.002197MB memory on GPU 0`."""
_NOT_CUDA = re.compile(r"MPS backend out of memory|DefaultCPUAllocator|XPU out of memory|"
                       r"device:CPU|not a failure", re.I)
"""Not the GPU's memory, or no failure: TensorFlow's BFC allocator warns `ran out of memory trying to allocate
... The caller indicates that this is not a failure`."""
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


def is_oom_line(line: str) -> bool:
    """Whether a line reports a CUDA out-of-memory error (not a CPU or MPS one)."""
    lowered = line.lower()
    if "memory" not in lowered and "alloc" not in lowered:
        return False  # a cheap test first: this runs on every line of a log
    return bool(_OOM.search(line)) and not _NOT_CUDA.search(line)


_SAID = re.compile(r"(?<![A-Za-z])OOM(?:s|ed|'d|ing)?(?![A-Za-z])(?![-_ ]?kill)|out[- ]of[- ](?:GPU[- ]|CUDA[- ]|device[- ]|video[- ])?memory|"
                   r"(?:CUDA|GPU) (?:memory|RAM) (?:exception|error)|exceed\w* (?:the |its |the card's |the GPU's )?(?:GPU(?:'s)? )?(?:RAM|memory|VRAM)|"
                   r"\b(?:not enough|insufficient)\s+(?:free\s+)?(?:GPU\s+|CUDA\s+|device\s+|video\s+)?memory\b|"
                   r"\b(?:failed|fails|unable|cannot|can't|could not|couldn't)\s+(?:to\s+)?alloc(?:ate)?\b|"
                   r"显存(?:不足|不够|溢出|爆)|爆显存|(?<![A-Za-z])(?:memory|VRAM)\s*(?:不足|不够|溢出|爆)|"
                   r"\b(?:GPU\s+memory|VRAM)\b[^.!?]{0,40}?\b(?:fills?\s+up|filled\s+up|spikes?|explodes?|blows?\s+up|keeps?\s+"
                   r"growing)\b[^.!?]{0,40}?\b(?:crash\w*|dies|died|fail\w*)\b|"
                   r"\b(?:eats?|eating|consumes?|consuming|uses?|using|takes?|taking)\s+(?:up\s+)?all\s+(?:of\s+)?(?:the\s+|my\s+)?"
                   r"(?:GPU\s+memory|VRAM|GPU's\s+memory)\b|"
                   r"\b(?:uses?|needs?|takes?)\s+(?:far\s+|much\s+|way\s+|a\s+lot\s+)?more\s+(?:GPU\s+)?memory\s+than\b"
                   r"[^.!?]{0,60}?\b(?:crash\w*|dies|died|fail\w*)\b", re.I)
"""An OOM in words, English or Chinese: letters, not word boundaries, delimit `OOM` (`一到eval_step就爆OOM了`)."""
_NOT_SAID = re.compile(
    r"\b(?:no|not|without|avoid\w*|prevent\w*|reduc\w*|never|instead of|rather than|"
    r"less|fewer|risk\w*|if|whether|in case|to handle|handl\w*|catch\w*)\b[^.!?:;,]{0,30}$|n't\s[^.!?:;,]{0,30}$", re.I)
"""Words before the OOM, in its clause, that say it did not happen, or might (`to avoid OOM`, `without OOM`, `if it
OOMs`); `did not help: still OOM` says it did."""
_HOST = re.compile(r"(?<!GPU )(?<!GPU's )\b(?:RAM|CPU|host|system memory|swap|MPS|killed)\b|(?<!显)(?<!卡)(?<!卡的)(?<!GPU)内存|CPUAllocator|"
                   r"被系统\s*(?:kill|杀)|\bkill(?:ed)?\s+by\s+(?:the\s+)?(?:system|OS|kernel)\b|"
                   r"alloc_cpu|Errno 12|Cannot allocate memory|\bmmap\b|shared memory", re.I)


_MEMORY_FAILED = re.compile(
    r"\b(?:crash\w*|die[sd]|dying|fail(?:s|ed|ing)?|stops?|stopped|hangs?|hung|freez\w*|froze|suspend\w*|abort\w*)\b"
    r"[^.!?]{0,40}?\b(?:due to|because of|for|with|caused by|owing to)\s+(?:an?\s+|the\s+|some\s+|insufficient\s+|"
    r"not enough\s+|lack of\s+|too little\s+|a lack of\s+){0,3}(?:GPU\s+|CUDA\s+|video\s+|device\s+)?(?:memory|VRAM)\b"
    r"(?![-_\s]*(?:usage|footprint|efficien\w*|saving|optimi\w*|format|layout|pinn\w*|map\w*|access))|"
    r"\b(?:memory|VRAM)[-\s]+(?:crash\w*|overflow\w*|explo\w*)\b|"
    r"(?:卡|GPU)\S{0,2}?(?:空间|内存)(?:不足|不够|溢出|爆)|"
    r"\b(?:(?:GPU|CUDA|video)\s+)?(?:memory|VRAM)(?:\s+(?:usage|use|consumption|footprint))?\s+(?:\w+\s+)?(?:fills?|filled|"
    r"spikes?|spiked|explodes?|exploded|blows?\s+up|blew\s+up|jumps?|jumped|grows?|grew|rises?|rose|climbs?|climbed|"
    r"shoots?\s+up|shot\s+up|max(?:es|ed)?\s+out|keeps?\s+(?:growing|increasing|rising|climbing))\b[^.!?]{0,60}?"
    r"\b(?:crash\w*|dies|died|fail\w*|stops?|stopped|killed|hangs?|hung|errors?|OOM\w*)\b|"
    r"\b(?:blows?|blew|max(?:es|ed)?)\s+(?:up|out)\s+(?:the\s+|all\s+)?(?:GPU\s+|CUDA\s+|video\s+)?(?:memory|VRAM)\b|"
    r"\bout[- ]of[- ]GPU[- ]RAM\b|"
    r"显存[^。，！？,.!?]{0,8}(?:占满|满了|一直涨|涨满|爆)[^。！？.!?]{0,12}(?:报错|挂了|崩溃|失败|停|卡死)", re.I)
"""A failure the person puts down to memory, in their own words (`the session crashes for memory problem`, `fails
due to insufficient GPU memory`, `getting the same memory crash`, `某张卡空间不足`: a card's space ran short), or memory
rising to its end and the run failing with it (`VRAM usage jumps to 24GB and it crashes`, `the GPU memory maxes out
and training stops`, `显存直接占满然后报错`)."""
_DENIED_INSIDE = denial(r"\b(?:no|nothing|without|nor)\b", chinese="没有?|不会")
"""A denial between the memory and the failure (`memory usage jumps at step 100 but nothing crashes`): no failure.
Not `不` alone: it is in the failure's own words (`显存不足`, memory ran short)."""


def said_oom(line: str) -> bool:
    """Whether a line of prose says an out-of-memory error happened on the GPU (`It need to be dequantized so
    immediately gives OOM`, `i also met the OOM error in validation`, `训练时显存不足`): not a negation or a
    condition (`to avoid OOM`), not the host's memory (RAM, the OOM killer, the machine itself going down). The
    host's words count in the OOM's own sentence only: a later sentence's remedy (`offload the state dict to cpu`)
    says nothing of which memory ran out."""
    said = sentences(line)
    if any(_HOST.search(sentence) and _MEMORY_FULL.search(sentence) for sentence in said):
        return False  # another sentence says the host's memory is what filled (`The host RAM is full at 64 GB.`)
    for sentence in said:
        if _HOST.search(sentence) or _MACHINE_DOWN.search(sentence):
            continue
        # every naming counts, not only the first (`Fix memory fragmentation OOM after resume: ... causing OOM during
        # the all-gather`: the fix is negated, the OOM it fixes is not)
        if any(_NOT_SAID.search(sentence, 0, found.start()) is None and
               (words is _SAID or _DENIED_INSIDE.search(found.group()) is None)
               for words in (_SAID, _MEMORY_FAILED) for found in words.finditer(sentence)):
            return True
    return False


_MACHINE = r"(?:\b(?:computer|PC|laptop|desktop|machine|server|system|session|instance|VM|node|(?<!CUDA )kernel)\b|电脑|机器|服务器)"
_MACHINE_DOWN = re.compile(
    _MACHINE + r"[^.!?]{0,40}?(?:\b(?:crash\w*|freez\w*|froze|hangs?|hung|die[sd])\b|死机|卡死|崩溃)|"
    r"\b(?:crash\w*|freez\w*|froze|hangs?|hung)\s+(?:the\s+|my\s+|our\s+|whole\s+|entire\s+)*" + _MACHINE, re.I)
"""The machine itself going down (`the computer will crash`, `crash the session`, `服务器死机`): a GPU out of memory
raises an error in the program; only the host's memory running out takes the machine (or Colab's session) with it."""


def machine_down(text: str) -> bool:
    """Whether a sentence says the machine went down from memory (`the computer will crash due to the memory being full
    (64G)`, `Colab crashes the session for memory problem`): the host's RAM ran out, not the GPU's."""
    if "emory" not in text and "存" not in text:
        return False  # the cheap test first: this runs on every line of a log
    return any(_MACHINE_DOWN.search(sentence) and (_MEMORY_FAILED.search(sentence) or _SAID.search(sentence) or
                                                    _MEMORY_FULL.search(sentence))
               for sentence in sentences(text))


_MEMORY_FULL = re.compile(r"\b(?:memory|RAM)\s+(?:is\s+|was\s+|being\s+|gets?\s+|got\s+|becomes?\s+|became\s+)?"
                          r"(?:full|exhausted|fill(?:s|ed|ing)?(?:\s+up)?)\b|\bfill(?:s|ed|ing)?\s+up\s+(?:all\s+)?(?:the\s+|my\s+)?"
                          r"(?:memory|RAM)\b|内存\S{0,3}(?:满|不足|不够|爆)", re.I)
"""Memory said to be full (`the memory fills up`, `内存满了`): beside the machine going down, the host's."""


_CAUSES = ((FRAGMENTATION, re.compile(r"\bfragment(?:ed|ation|s)?\b|碎片|(?:expandable_segments|max_split_size_mb)"
                                     r"[^.!?]{0,80}?\b(?:fix\w*|solv\w*|resolv\w*|help\w*|work\w*|gone|disappear\w*)|"
                                     r"\b(?:no|not (?:enough|a)|lack of|large enough|largest|big enough)\s+(?:\w+\s+){0,2}"
                                     r"contiguous\b|\bcontiguous[- ](?:\w+[- ])?(?:block|chunk|region|hole|allocation|space)s?\b|"
                                     r"\b(?:although|though|even|despite|while|but|yet)\b[^.!?]{0,60}?\b(?:plenty|lots|ample|"
                                     r"\d+(?:\.\d+)?\s*(?:GB|GiB|MB|MiB|G))\b[^.!?]{0,30}?\b(?:cached|in (?:the )?(?:memory )?pool|"
                                     r"reserved but unallocated|unallocated)\b|"
                                     r"reserved[- ]but[- ]unallocated", re.I)),
           (OTHER_PROCESS, re.compile(
               r"\b(?:other|another|different|second|zombie|stale|orphan\w*|leftover|previous|dead|defunct|ghost|"
               r"background|parallel|concurrent)\s+(?:\w+\s+){0,2}"
               r"(?:process(?:es)?|programs?|jobs?|users?|applications?|apps?|sessions?|kernels?|people|ranks?|"
               r"containers?|instances?|notebooks?|terminals?|shells?|consoles?)\b|\bsome(?:one|body) else\b|"
               r"\b(?:zombie|stale|orphan\w*|leftover|dead|defunct|ghost|background|parallel|concurrent)\s+(?:\w+\s+){0,2}"
               r"(?:runs?|trainings?|experiments?|tasks?)\b|"
               # a run (or an ML task) compared (`with the previous run batch 8 worked`) is no holder: only one still there or beside
               r"\b(?:other|another|different|second|previous)\s+(?:\w+\s+){0,2}(?:runs?|trainings?|experiments?|tasks?)\b"
               r"[^.!?]{0,40}?\b(?:still|running|alive|hold\w*|held|occup\w*|same\s+(?:GPU|card|device)|on\s+(?:the\s+)?"
               r"(?:GPU|card|device)|in\s+(?:the\s+)?background|at\s+the\s+same\s+time|simultaneous\w*)\b|"
               r"\b(?:all|every|each|\d+|two|three|four|eight|several|multiple)\s+(?:\w+\s+){0,2}(?:ranks?|process(?:es)?|"
               r"workers?)"
               r"\b[^.!?]{0,40}?\b(?:(?:share|sharing)\s+(?:the same |one |a single |the first )?(?:GPU|card|device|cuda)\b|"
               # `on`/`use` a named card: `8 processes using GPU memory` is a distributed run's ranks, one per card
               r"(?:on|onto|to|into|use|using)\s+(?:(?:the same |one |a single |the first )(?:GPU|card|device)\b|(?:GPU|card|device|cuda)"
               r"\s*:?\s*\d))|"
               r"\b(?:both|two|three|four|multiple|several|all)\s+(?:\w+\s+){0,2}(?:jobs|processes|servers|runs|"
               r"trainings|instances|containers|users|programs)\b[^.!?]{0,60}?\b(?:same|one|a single)\s+(?!per\b|for\s+each\b)"
               r"(?:\w+\s+){0,2}(?:GPUs?|cards?|devices?)\b(?!\s+(?:each|apiece)\b)|"  # not `one per GPU`, `one GPU each`
               r"\b(?:GPU|card|device|cuda)\s*:?\d{0,2}\s+(?:is|was|were|are)\s+(?:already\s+|still\s+)?(?:busy|occupied|"
               r"taken|in use by|used by)\b(?!\s+(?:me|my|this|our)\b)|"
               r"\brestart(?:ing|ed|s)?\s+(?:the\s+)?(?:python\s+process|kernel|runtime|notebook|session|jupyter)\b"
               r"(?![^.!?]{0,40}(?:\b(?:not|never|no)\b|n't))|"
               r"\b(?:every|each|all)\s+(?:\w+\s+)?(?:ranks?|process(?:es)?|workers?)\b[^.!?]{0,60}?\b(?:contexts?|memory|"
               r"allocat\w*)\b[^.!?]{0,30}?\b(?:on|to)\s+(?:the\s+first\s+GPU|(?:GPU|cuda|device)\s*:?\s*0)\b|"
               r"\b(?:process(?:es)?|jobs?|servers?|instances?|containers?)\b[^.!?]{0,40}?\bshar\w*\s+(?:the\s+|one\s+|a\s+)?"
               r"(?:same\s+|single\s+)?(?:GPU|card|device)\b|"
               r"(?:其他|别的|其它|别人的?)(?:进程|程序|用户|人|任务)|(?:所有|全部|每个)的?\s*(?:进程|rank|worker)[^。！？]{0,10}?"
               r"(?:跑|放|在|分配|挤)(?:到|在)?了?\s*(?:0\s*号?卡|卡\s*0|GPU\s*0|第一张卡)|僵尸进程|被[^，。,.!?！？]{0,20}占用", re.I)))
_HELD_WHAT = r"(?:\s+(?:\d+(?:\.\d+)?\s*%|of|the|my|all|its|\w+(?=\s+(?:of|the|my)\b)|\w+(?=\s+\d))){0,3}?\s+(?:\d+(?:\.\d+)?\s*(?:[GM]i?B|G|M)\b|(?:\w+\s+)?(?:memory|VRAM|GPU|card)\b)"
_HOLDER = re.compile(
    r"\b(?:notebook|kernel|session|runtime)s?\b[^.!?]{0,40}?\bstill\s+(?:hold\w*|held|occup\w*|us(?:e|es|ing)|tak(?:e|es|ing)|"
    r"keep\w*|allocat\w*|reserv\w*)" + _HELD_WHAT + "|"
    r"\b(?:xorg|x ?server|gnome[- ]shell|kwin|compositor|(?:the\s+|my\s+)desktop|(?:the\s+|my\s+)display|gdm|lightdm|sddm|"
    r"x?wayland|display\s+manager|"
    r"window\s+manager|chrome|chromium|firefox|(?:web )?browsers?|steam|discord|"
    r"vllm|sglang|ollama|(?:inference|model|serving)\s+server)\b"
    r"[^.!?]{0,40}?\b(?:hold\w*|held|occup\w*|us(?:e|es|ed|ing)|tak(?:e|es|ing)|took|eat\w*|hog\w*|grab\w*|consum\w*)" +
    _HELD_WHAT, re.I)
"""Who else holds the card's memory, in the person's words: a notebook or its kernel still holding it after the
attempt that failed (`my jupyter notebook was still holding the memory`), the desktop's programs (`Xorg and chrome
taking 3GB of my 8GB card`); what they hold follows the verb (`still uses gradient checkpointing` holds nothing)."""
_PHANTOM = re.compile(
    r"(?:even though|although|though|but|while|yet|despite|however|and)\s*,?\s*(?:there\s+(?:is|are)\s+)?"
    r"(?:nothing|no\s+(?:\w+\s+)?(?:process(?:es)?|programs?|jobs?|one))\b(?!\s+else\b[^.!?]{0,40}\bmy\b)|"
    r"\bbefore\s+(?:I\s+|we\s+)?(?:even\s+)?(?:start\w*|run\w*|launch\w*|load\w*)\b[^.!?]{0,60}\b(?:shows?|"
    r"says?|lists?|reports?)\b|"
    r"\bafter\s+(?:I\s+|we\s+)?(?:kill(?:ed)?|stopp?(?:ed)?|exit(?:ed)?|terminat\w+|interrupt\w*|clos\w+|ctrl\W?c)\b|"
    r"\bafter\s+(?:the|my|a|its)\s+(?:\w+\s+)?(?:process|script|program|job|run|training|kernel)\s+(?:exits?|exited|"
    r"ends?|ended|finish\w*|crash\w*|dies|died|stops?|stopped|(?:is|was|gets|got)\s+killed)\b|"
    r"\buntil\s+(?:I\s+|we\s+)?(?:a\s+|the\s+)?reboot\w*\b",
    re.I)
_HELD = re.compile(r"\b(?:used|occupied|in use|taken|allocated|held|holds|holding|still|remains?|stays?)\b|占用|占着|"
                   r"\b(?:not|never)\s+(?:be(?:ing)?\s+)?(?:freed|released|returned|cleared)\b", re.I)
"""Memory held with nothing of the person's running (`nvidia-smi shows 20 GB used even though nothing is running`,
`the memory stays occupied after I killed the script`): a process the person does not see holds the card."""
_PROGRAMS = re.compile(r"^\W*(?:\[[^\]]{0,40}\]:?\s*)*(?:[\w.]*(?:Error|Exception)\b|[A-Z]\s+[\w/]+\.cc:)|Tried to allocate|"
                       r"(?:^|\s)\d{4}-\d\d-\d\d[ T]|\b(?:ERROR|WARNING|INFO)\b")
"""An OOM line that is the program's (an exception, a log record) rather than a person's sentence naming it."""
_DID_NOT = re.compile(r"\b(?:not|never|no longer)\b|n't", re.I)
"""A fix that did not work (`expandable_segments did not help`): no evidence for its cause."""
_CAUSE_HINT = re.compile(r"try setting (?:max_split_size_mb|PYTORCH_CUDA_ALLOC_CONF)|See documentation for Memory|"
                         r"If reserved (?:but unallocated )?memory is", re.I)
"""PyTorch's own advice under its message names fragmentation as a possibility, not as what happened."""


_SAID_SIZE = r"~?\s*(\d{1,6}(?:\.\d{1,3})?)\s*(GiB|GB|G|MiB|MB|M)\b"
_SAID_RESERVED = re.compile(_SAID_SIZE + r"\s+(?:(?:of|is|are|was|were|being)\s+)?reserved\b|\breserved\s*(?:memory\s+)?"
                            r"(?:of|is|was|at|:|=)?\s*" + _SAID_SIZE, re.I)
_SAID_ALLOCATED = re.compile(_SAID_SIZE + r"\s+(?:(?:of|is|are|was|were|being|actually)\s+)?(?:allocated|in use by tensors)\b|"
                             r"\ballocated\s*(?:memory\s+)?(?:of|is|was|at|:|=)?\s*" + _SAID_SIZE, re.I)
"""Sizes the person gives for the cache and for the tensors in it (`~83 GB reserved vs ~49 GB allocated`)."""


def _held_little(words: str) -> bool:
    """Whether the size a holder is said to take is under a GiB (`Chrome uses 300MB of VRAM`): a desktop's share,
    not what filled the card."""
    found = re.search(_SAID_SIZE, words, re.I)
    size = parse_size(found.group(1), found.group(2)) if found else None
    return size is not None and size < GIB


def said_account(line: str) -> str:
    """FRAGMENTATION when the person's own numbers show the cache holding far more than its tensors use (a GiB and a
    quarter of the cache unused): the memory was there, in blocks the next request could not use; '' otherwise."""
    reserved, allocated = _SAID_RESERVED.search(line), _SAID_ALLOCATED.search(line)
    if reserved is None or allocated is None:
        return ""
    held = parse_size(*[g for g in reserved.groups() if g is not None][:2])
    used = parse_size(*[g for g in allocated.groups() if g is not None][:2])
    if held is None or used is None or held < used + max(GIB, held // 4):
        return ""
    return FRAGMENTATION


_REMEDIES = (
    (FRAGMENTATION, re.compile(r"expandable[_ ]segments|max_split_size_mb|cuda_malloc_async|garbage_collection_threshold|"
                               r"XLA_PYTHON_CLIENT_ALLOCATOR", re.I)),
    (OTHER_PROCESS, re.compile(r"\breboot\w*|重启|(?:杀掉|kill\s*掉|结束)(?:了)?\S{0,6}(?:进程|程序)|(?:进程|程序)\s*(?:杀掉|kill\s*掉)|\brestart\w*\s+(?:the\s+|my\s+)?(?:machine|server|computer|pc|system|node|"
                               r"instance|vm)\b|\b(?:kill\w*|pkill|terminat\w*)\s+(?:-9\s+)?(?:the\s+|a\s+|an\s+|all\s+)?"
                               r"(?:\w+\s+){0,2}(?:process(?:es)?|python|pids?|jobs?)\b|\bset_device\b", re.I)),
    (OTHER_PROCESS, CARD_SWAP),
    (OTHER_PROCESS, CLOSED_OTHER))
"""What the person did about the OOM, and the kind it tells when it worked: an allocator setting (PyTorch's expandable
segments or split size, TensorFlow's async allocator, XLA's platform allocator) mends fragmentation; rebooting the
machine, killing a process, or setting each rank's device frees memory someone else held."""
_WORKED = re.compile(r"\b(?:fix\w*|solv\w*|resolv\w*|help(?:s|ed)?|work(?:s|ed)?|gone|go(?:es)? away|went away|"
                     r"disappear\w*|runs?\s+(?:fine|ok|through|smoothly)|ran\s+(?:fine|ok|through|smoothly)|no\s+(?:more\s+)?"
                     r"(?:OOMs?|errors?)|no longer|succe\w+|without\s+(?:any\s+)?(?:errors?|OOMs?|problems?|issues?)|anymore)\b|"
                     r"(?:does|did|will|wo)(?:n't| not)\s+(?:OOM|crash|fail)\w*|解决|好了|正常|成功|不再|不(?:会)?报错|没(?:有)?(?:再)?报错|就可以了|就行了|能跑了|跑起来了", re.I)
_FIX_FAILED = re.compile(r"\b(?:not|never|still|tried)\b|n't\b", re.I)
"""A remedy that did not work (`expandable_segments did not help`, `I tried rebooting, it still fails`)."""
_NO_MORE = re.compile(r"anymore|no longer", re.IGNORECASE)
"""The failure is over (`it doesn't OOM anymore`): its `not` tells no failed remedy."""
_ZH_FAILED = re.compile(r"还是|仍然|依然|没有?(?:解决|用|效果|改善)|不行|无效|但是?[^。！？]*(?:OOM|报错|溢出|不足)|"
                        r"\bbut\b[^.!?]*(?:\bOOM|out of memory|\berror|\bfail|\bcrash)", re.I)
"""The remedy did not work, or what worked was something else (`set_device(rank) works, but it OOMs at step 5`)."""


def remedy_cause(line: str) -> str:
    """The kind a remedy that worked tells (`I fixed it by setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`,
    `rebooting the machine fixed it`), or ''; a sentence that says it failed, or names none that worked, tells none."""
    for sentence in sentences(line):
        worked = _WORKED.search(sentence)
        if worked is None:
            continue
        # the words that say it worked carry their own negation (`doesn't OOM`): the failure is read without them
        if not _NO_MORE.search(sentence) and _FIX_FAILED.search(_WORKED.sub(" ", sentence)) or \
                _ZH_FAILED.search(sentence):
            continue
        for kind, remedy in _REMEDIES:
            if remedy.search(sentence):
                return kind
    return ""


_CJK_EDGE = re.compile(r"(?<=[\u3400-\u9fff])(?=[A-Za-z0-9])|(?<=[A-Za-z0-9])(?=[\u3400-\u9fff])")
"""Where a Chinese character touches a Latin letter or digit (`显存fragmentation的问题`): both are word characters, so
no word boundary falls there until a space is put in."""


def cjk_spaced(text: str) -> str:
    """The text with a space wherever Chinese touches Latin letters or digits, so word boundaries fall there."""
    return _CJK_EDGE.sub(" ", text)


def said_cause(line: str) -> str:
    """The OOM's cause in the person's words (`the backend ooms because of memory fragmentation`, `another
    process holds the GPU`), or '': a kind for an OOM whose message gives no numbers."""
    if is_oom_line(line) and _PROGRAMS.search(line):
        return ""  # the program's message (its own hints name causes it does not know of)
    line = cjk_spaced(line)
    if _PHANTOM.search(line) and _HELD.search(line):
        return OTHER_PROCESS
    if "reserved" in line.lower() and "allocated" in line.lower() and said_account(line):
        return FRAGMENTATION
    remedy = remedy_cause(line)
    if remedy:
        return remedy
    holder = _HOLDER.search(line)
    if holder and _NOT_SAID.search(line, 0, holder.start()) is None and \
            not _DID_NOT.search(holder.group()) and not _held_little(holder.group()):
        return OTHER_PROCESS
    if someone_else(line):
        return OTHER_PROCESS
    for kind, words in _CAUSES:
        found = words.search(line)
        if found and (kind != FRAGMENTATION or not _CAUSE_HINT.search(line)) and \
                _hypothetical(line, found.start()) is False and not _DID_NOT.search(found.group()):
            return kind
    return ""


_OBSERVED_IF = re.compile(r"\b(?:found|find|noticed?|observed?|realized?|discovered|learned|saw|see)\s+(?:out\s+)?"
                          r"(?:that\s+)?(?:if|whenever|when)\s+[^.!?:;,]{0,30}$", re.I)
"""A condition the person observed (`I found that if two mxnet programs run on the same GPU ...`): what they saw
happen, not a maybe."""


def _hypothetical(line: str, at: int) -> bool:
    """Whether the words before `at`, in its clause, deny or only suppose what follows (`to avoid`, `if`), unless
    the condition is one the person observed."""
    return _NOT_SAID.search(line, 0, at) is not None and _OBSERVED_IF.search(line, 0, at) is None


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
_AT_START = re.compile(r"\btotal ?memory:\s*" + _SIZE + r"|\bfree ?memory:\s*" + _SIZE, re.I)
"""TensorFlow 1.x's device report at start, before it allocates anything: `Total memory: 7.92GiB` then `Free memory:
190.31MiB`, or `totalMemory: 15.90GiB freeMemory: 3.12GiB` on one line."""


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


def memory_at_start(line: str) -> tuple[int | None, int | None]:
    """(total, free) bytes a framework's device report at start gives on this line (None where it gives none)."""
    total = free = None
    for match in _AT_START.finditer(line):
        if match.group(1) is not None:
            total = parse_size(match.group(1), match.group(2))
        else:
            free = parse_size(match.group(3), match.group(4))
    return total, free


def held_before(total: int, free: int) -> bool:
    """Whether the card's memory held before this program allocated anything is others' real share (beyond a
    display's few hundred MiB): the same floor as an old-format message's other use."""
    return total - free >= max(2 * GIB, total // 10)


_TF_POOL = re.compile(r"Created TensorFlow device \([^)]{0,200}?with (\d{1,9}) MB memory\)")
"""TensorFlow's device at start: the pool it sized from the memory the card reported free (`Created TensorFlow device
(/job:localhost/replica:0/task:0/device:GPU:0 with 7524 MB memory)`; its MB are MiB, 7524 MB the 7889485824 bytes it
then asks the driver for)."""
_DRIVER_REFUSED = re.compile(r"(?:cuda|rocm)_driver\.cc:\d+\] failed to allocate [\d.]{1,12}\s*[KMGT]?i?B?\s*"
                             r"\((\d{1,15}) bytes\)")
"""The driver refusing an allocation (`rocm_driver.cc:601] failed to allocate 7.35G (7889485824 bytes) from device:
hipError_t(1002)`), with its exact size."""


def tf_pool(line: str) -> int | None:
    """Bytes of the pool TensorFlow's device report at start gives, or None."""
    found = _TF_POOL.search(line) if "TensorFlow device" in line else None
    return int(found.group(1)) * MIB if found else None


def pool_refused(text: str, pool: int) -> bool:
    """Whether the driver refused the pool itself (the first allocation of a preallocating TensorFlow, its size to
    within a tenth): TensorFlow had just read that much free, so between that reading and the allocation something
    outside the program took it. A later, smaller allocation refused is the program's own growth (allow_growth)."""
    found = _DRIVER_REFUSED.search(text)
    return found is not None and abs(int(found.group(1)) - pool) * 10 <= pool


def pool_note(pool: int) -> str:
    """Why the memory is another's, for the advice (`... held the card` follows it)."""
    return f"the driver refused the {gib(pool)} pool TensorFlow sized from the memory the card reported free at start"


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


BFC_REQUEST = re.compile(r"ran out of memory trying to allocate " + _SIZE, re.I)
BFC_STAT = re.compile(r"^\s*(?:\[[^\]]{0,40}\]:?\s*)?(Limit|InUse|LargestFreeBlock):\s+(\d{1,15})\s*$")
"""TensorFlow's and XLA's BFC allocator on failure: `Allocator (GPU_0_bfc) ran out of memory trying to allocate
1.17GiB`, then its chunk summary and its stats, one per line: `Limit:  15545312871`, `InUse:  14912008192`, and in
newer versions `LargestFreeBlock:  1200000000`."""


SUMMARY_ROW = re.compile(r"^\s*\|\s*(Allocated memory|GPU reserved memory|Non-releasable memory)\s*\|\s*" + _SIZE)
"""A row of torch.cuda.memory_summary(): its current usage (`| Non-releasable memory |   7900 MiB | ...`)."""


def summary_cause(rows: dict[str, int]) -> tuple[str, str]:
    """(FRAGMENTATION, why) when memory_summary()'s non-releasable memory (cached blocks split and partly in use,
    which the allocator can neither use for a larger request nor give back) is a real share of what it reserved."""
    spare, reserved = rows.get("Non-releasable memory"), rows.get("GPU reserved memory")
    if spare is None or reserved is None or spare < max(GIB, reserved // 5):
        return "", ""
    return FRAGMENTATION, f"memory_summary(): {gib(spare)} non-releasable of {gib(reserved)} reserved"


def bfc_cause(stats: dict[str, int]) -> tuple[str, str]:
    """(FRAGMENTATION, why) when the allocator's pool had room for the request but no block of it did: its limit
    less what was in use held the request and a real share of the pool (or its largest free block, when printed,
    was smaller than the request); ('', '') otherwise, a full pool being what the message says already."""
    requested, limit, in_use = stats.get("requested"), stats.get("Limit"), stats.get("InUse")
    if requested is None or limit is None or in_use is None or not 0 <= in_use <= limit:
        return "", ""
    spare, largest = limit - in_use, stats.get("LargestFreeBlock")
    if spare < requested or spare < max(256 * MIB, limit // 20) or (largest is not None and largest >= requested):
        return "", ""
    return FRAGMENTATION, (f"the allocator's pool had {gib(spare)} free of its {gib(limit)} limit ({gib(in_use)} in "
                           f"use), but no block of it held the {gib(requested)} asked for")


_TF_TEXT = re.compile(r"bfc_allocator|GPU_\d+_bfc|ResourceExhausted|RESOURCE_EXHAUSTED|OOM when allocating", re.I)


def allocator_setting(report: OomReport) -> tuple[str, str]:
    """The environment setting that lets the allocator serve a request its fragmented cache could not: PyTorch's
    expandable segments; TensorFlow's CUDA async allocator (TensorFlow names it in its own hint); JAX's
    allocate-on-demand platform allocator."""
    if not _TF_TEXT.search(report.text):
        return "PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"
    if re.search(r"\bjax|xla_extension|XlaRuntimeError", report.text, re.I):
        return "XLA_PYTHON_CLIENT_ALLOCATOR", "platform"
    return "TF_GPU_ALLOCATOR", "cuda_malloc_async"


SMI_PROCESS = re.compile(r"^\s*\|\s+(\d{1,2})\s+(?:N/A\s+N/A\s+|\d{1,3}\s+\d{1,3}\s+)?(\d{1,10})\s+(?:C|G|C\+G|M|M\+C)\s+"
                         r"\S.*?\s(\d{1,7})\s*MiB\s*\|\s*$")
"""A row of nvidia-smi's process table: `|    0   N/A  N/A     41234      C   python     9800MiB |` (drivers since
450), `|    0     41234      C   python     9800MiB |` (before)."""


def smi_row(line: str) -> tuple[int, int, int] | None:
    """(gpu, pid, bytes) of an nvidia-smi process row, or None."""
    row = SMI_PROCESS.match(line) if "MiB" in line else None
    return (int(row.group(1)), int(row.group(2)), int(row.group(3)) * MIB) if row else None


def smi_card(rows: list[tuple[int, int, int]], report: OomReport) -> tuple[int, list[tuple[int, int]]] | None:
    """(gpu, [(pid, bytes)]) of the failing card when nvidia-smi lists processes besides this one that together hold
    a GiB or more of it: another job, or the stray CUDA contexts (a few hundred MiB each) that ranks without their
    own device open on the first card; None when it shows this run alone on each card, or beside a desktop's few
    hundred MiB."""
    by_gpu: dict[int, list[tuple[int, int]]] = {}
    for gpu, pid, size in rows:
        if size >= 256 * MIB and (report.gpu is None or gpu == report.gpu):
            by_gpu.setdefault(gpu, []).append((pid, size))
    return next(((gpu, procs) for gpu, procs in by_gpu.items()
                 if len(procs) >= 2 and sum(b for _, b in smi_others(procs, report)) >= GIB), None)


def smi_others(procs: list[tuple[int, int]], report: OomReport) -> list[tuple[int, int]]:
    """The card's processes besides this one: the one whose use the message gives, else the largest."""
    mine = report.process_used or report.reserved
    own = min(procs, key=lambda p: abs(p[1] - mine)) if mine else max(procs, key=lambda p: p[1])
    return [p for p in procs if p != own]


def classify(report: OomReport) -> str:
    """The cause: another process holds the card, the cache is fragmented, or the card is full."""
    if report.total is None and report.allocated is not None and report.reserved_unallocated is not None and \
            report.requested is not None and report.reserved_unallocated >= max(report.requested, GIB):
        return FRAGMENTATION  # the card's total lost from the paste: the cache alone held the request, in no block
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
    other = report.other_used
    if report.other_pids and sum(b for _, b in report.other_pids) >= max(GIB, total // 20):
        return True
    if other is None:
        return False
    # The old format omits this process's CUDA context (0.3-1.5 GiB), so it needs a wider margin.
    floor = max(2 * GIB, total // 10) if report.process_used is None else max(GIB + GIB // 2, total // 20)
    return other >= floor


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
    turned a cap-reached OOM into 'other processes hold the card' and the guard did nothing."""
    held = sum(b for _, b in others) or sum(b for _, b in report.other_pids)
    if held < GIB:
        return False
    if report.free is not None and report.requested is not None:
        return report.free < report.requested  # the card itself was short: what others hold matters
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
    """Bytes as "12.34 GiB", under a GiB as "20.00 MiB" as PyTorch prints it (not "0.02 GiB", and not "0.00 GiB"
    for a few MiB free), or "?" when unknown."""
    if value is None:
        return "?"
    return f"{value / GIB:.2f} GiB" if abs(value) >= GIB else f"{value / MIB:.2f} MiB"
