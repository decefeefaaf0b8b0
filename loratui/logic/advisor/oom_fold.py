"""The OOM as the Advisor's fold reads it (core.py): the message (and its wrapped lines, a phrase a wrap cut), the
traceback after it, where it struck (a save, a merge, the card's context), what the text says of the card at start,
the host's RAM running out instead, and an OOM only a person's words report. The Advisor's state, on which these
methods work, is pickled in events.idx with the Advisor. Pure logic."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

from loratui import events
from loratui.logic import oom, oom_start, oom_words
from loratui.logic.advisor.advice import Advice, Finding
from loratui.logic.advisor.phase_words import looks_like_code
from loratui.logic.clauses import cjk_spaced
from loratui.logic.fmt import quoted
from loratui.logic.word_gate import WordGate

if TYPE_CHECKING:
    from loratui.logic.advisor.text import TextWatch
    from loratui.logic.advisor.watches import Context
    from loratui.logic.tracebacks import TraceScanner

MERGE = re.compile(r"merg|dequantiz|unload|合并", re.I)
"""Merging an adapter in: peft's merge_and_unload, unsloth's `Merging 4bit and LoRA weights`, a 4-bit base dequantized."""

_ABOUT_MEMORY = re.compile(r"memory|VRAM|\d\s*(?:[GM]i?B|G|M)\b|显存|内存|(?<![A-Za-z])OOM|PYTORCH_CUDA_ALLOC_CONF|"
                           r"expandable_segments|max_split_size_mb|cuda_malloc_async|"
                           r"\b(?:tak(?:e|es|ing)|took|hog\w*|occupy\w*|occupie[sd]|eat\w*)\s+(?:up\s+)?(?:the\s+|all\s+(?:the\s+)?|"
                           r"my\s+)?GPUs?\b", re.I)
"""A sentence about the card's memory: only such a cause stands for an OOM no sentence names (`a shared cluster with
other users` is no account of memory; `more and more processes are taking up the GPU` is: what they take is it)."""

_HOST_RAM_TOLD = (
    r"(?<!GPU )(?<!GPU's )(?<!CUDA )(?<!VRAM )\b(?:memory|RAM)\s+usage\b[^.!?\n]{0,30}?\b(?:ris|increas|grow|climb|"
    r"go(?:es|ing)?\s+up|keep)\w*[^.!?\n]{0,20}?\b(?:to\s+|reach\w*\s+)?100\s*%|"
    + oom_words.HOST_MEM_ZH + r"[^。！？\n]{0,8}?(?:升高|上涨|增长|增加|上升|暴涨|飙升)[^。！？\n]{0,20}?(?:崩溃|崩了|崩掉|被杀|kill|挂掉|挂了|死机)|"
    r"\b(?:zsh|bash|the\s+shell|the\s+os|the\s+operating\s+system|linux)\s+kill(?:s|ed)?\s+(?:the\s+|my\s+|our\s+)?"
    r"(?:process|job|program|script|python)\b|"
    r"\bkill(?:ed)?[\"'”]?\s+(?:\w+\s+){0,2}by\s+(?:the\s+)?(?:os|system|kernel|operating\s+system)\b|"
    r"\b(?:eats?|eating|ate|consumes?|consuming|consumed|(?:uses?|used|takes?|took|fills?|filled)\s+up)\s+(?:up\s+)?"
    r"all\s+(?:of\s+)?(?:the\s+|my\s+)?\d+\s*(?:G|GB|GiB)\s+(?:of\s+)?(?:system\s+|host\s+|CPU\s+)?(?:RAM|memory)\b|"
    r"\b(?:uses?|used|using|takes?|took|taking|eats?|ate|eating|consumes?|consumed|consuming|fills?|filled|filling)\s+"
    r"(?:up\s+)?(?:about\s+|around\s+|over\s+|~\s*)?\d+(?:\.\d+)?\s*(?:G|GB|GiB)\s+(?:of\s+)?"
    r"(?:system\s+|host\s+|CPU\s+)?RAM\b[^.!?\n]{0,30}?\b(?:crash\w*|(?:is|gets?|got)\s+killed|dies|died)|"
    r"\b(?:eat|ate|consum|use[ds]?\b|using|take|took|fill|exhaust)\w*\s+(?:up\s+)?(?:all|the\s+entire|the\s+whole)\s+"
    r"(?:of\s+)?(?:the\s+|my\s+|our\s+|this\s+)?(?:(?:machine|system|computer|server|node|host|PC)'s\s+)?"
    r"(?:system\s+|host\s+|CPU\s+|available\s+)?(?:D?RAM|swap)\b|"
    r"\b(?:host|system|CPU)\s+(?:memory|RAM)\s+usage\b[^.!?\n]{0,30}?\b(?:ris|increas|grow|climb|keep)\w*"
    r"[^.!?\n]{0,50}?\b100\s*%")
"""The host's memory running out as people tell it, with no kill line printed (R25): its usage said to climb to 100 %,
内存 said to rise until the program crashes or is killed (`内存不断升高，最后超过16g环境崩溃`), the shell or the OS that
killed the process (`Zsh kill the process`, `a "kill" problem by the os`), or a job said to eat all of a sized memory
(`eat up all my 64GB memory`), or said to use a size of RAM and crash (`uses up 13GB of RAM and crashes`, R27). Not
said of the card (`GPU memory usage rises to 100%`). R30: a job said to use all or the whole of the host's RAM or swap
(`exhausts all host RAM & swap`, `eats up the entire RAM`, `used all of my machine's DRAM`), the host's RAM usage said
to grow until 100 % (`host RAM usage keeps growing until it reaches 62 GiB (100 %)`)."""

_HOST_RAM = re.compile(oom_words.HOST_ALLOCATOR + r"|(?<![\w.])MemoryError\b|"
                       r"^\s*Killed\s*$|Signals\.SIGKILL|\bSIGKILL\b|(?:exit|return)\w*\s*(?:with\s+)?(?:code|status)?\s*"
                       r"[:=]?\s*(?:-9|137)\b|\boom-kill|" + oom.KERNEL_OOM.pattern + "|"
                       r"\b(?:system|OS|kernel)\b[^.!?\n]{0,25}?\bkill(?:s|ed|ing)\s+(?:the\s+|my\s+|our\s+)?"
                       r"(?:process|job|program|script|python)\b|"
                       r"(?<!CUDA )(?<!GPU )(?<!out of )(?<!out-of-)(?<![A-Za-z])memory ?error(?![A-Za-z])|"
                       r"\bout of (?:host |system |CPU )?RAM\b|(?<!GPU )\bRAM (?:is )?(?:full|exhausted|ran out|runs out)|"
                       + oom_words.HOST_MEM_ZH + r"(?:不足|溢出)|paging file is too small|crashed after using all available RAM|"
                       r"The Kernel crashed while executing code|kernel appears to have died|被\s*(?:kill|杀)|"
                       r"(?:OOM|" + oom_words.HOST_MEM_ZH + r")\s?\S{0,4}?\s?被系统\s*(?:kill|杀)|"
                       r"(?<!GPU )\bRAM\b[^.!?]{0,20}?\b(?:fills?\s+up|filled\s+up|gets\s+full)\b|"
                       r"(?<!GPU )\bRAM\b[^.!?]{0,20}?\b(?:increas|grow|climb|keeps\s+(?:going\s+up|rising))\w*"
                       r"[^.!?]{0,20}?\b(?:above|over|to|past|until)\s+\d|"
                       r"\bneeds?\s+more\s+(?:RAM|memory)\s+than\s+(?:my|the|this)\s+(?:machine|computer|server|system|pc|node)\b|"
                       r"\b(?:got|gets|get|getting|was|were|is|being|be|been)\s+killed\b"
                       r"(?![^.!?]{0,60}\b(?:time ?limit|timeout|"
                       r"scheduler|preempt\w*|scancel|by (?:me|us|hand)))|"
                       r"\b(?:prompts?|prompted|shows?|showed|says|said|prints?|printed|outputs?|displays?|displayed)\s*:?\s*"
                       r"[\"'`]?killed(?![A-Za-z])(?!\s+(?:process\w*|jobs?|tasks?|workers?|threads?)\b)|"
                       r"\b(?:insufficient|not enough|out of|ran out of|runs out of|too much|so much)\s+(?:the\s+)?(?:\(?cpu\)?\s+|"
                       r"system\s+|host\s+)?RAM\b|超出.{0,6}" + oom_words.HOST_MEM_ZH + "|" + oom_words.HOST_MEM_ZH +
                       r"(?:(?!不像|不是|并非|并不|没有?)[^。！？]){0,4}(?:不够|爆了|占满|超出)|" + _HOST_RAM_TOLD, re.I)
"""The host's memory ran out, not the GPU's: the CPU allocator, Python's MemoryError, the kernel's OOM killer (the
shell's `Killed`, exit -9 or 137, torchrun's `exitcode: -9`, the kernel's own log line, `the system ended it by killing
the process`, a notebook's kernel that died, 进程被kill), Windows' paging
file, Colab's `Your session crashed after using all available RAM`, the shell's `Killed` as the person says it was
printed (`the quantization prompt KILLED at the end`, `the process outputs : Killed`), or the person's words (`out of
RAM`, `memory error`,
内存不足; not where the person says it is not: `看显存和内存，不像是不够的样子`)."""
_ON_DEVICE = re.compile(r"\b(?:RAM|memory)\s+(?:on|of|in)\s+(?:the\s+|my\s+|each\s+|a\s+)?(?:GPU|card|device|TPU|"
                        r"graphics\s+card|accelerator)s?\b|Largest contiguous region of free memory", re.I)
"""Memory the line places on a device (`using so much RAM on the GPU`, XLA's `Memory Error: Largest contiguous region of
free memory is not enough` on a TPU's HBM): the host's words there are about the card's memory, no host reading."""
_HOST_SIZED = re.compile(r"\b\d+(?:\.\d+)?\s*(?:G|GB|GiB|T|TB)\s+(?:of\s+)?(?:CPU|system|host)\b|"
                         r"\b(?:a\s+)?(?:RAM|system\s+memory|host\s+memory|CPU\s+memory)\s+of\s+\d+(?:\.\d+)?\s*"
                         r"(?:G|GB|GiB|T|TB)\b|\b\d+(?:\.\d+)?\s*(?:G|GB|GiB|T|TB)\s+(?:of\s+)?(?:D?RAM)\b", re.I)
"""A size of the host's memory (`I only have a 32G CPU`, `32 GB of CPU RAM`, `with a RAM of 85 GB`) (R31): after the
person's own word for an OOM that names no GPU, it says whose memory ran out (`_host_oom`); alone it is no OOM."""
_CARD_MAKER = re.compile(r"\b(?:NVIDIA|GeForce|Radeon)\b|\b[6-9][5-9]0\s?ti\b", re.I)
"""A card named by its maker or an older model (`NVIDIA 980Ti ... with 16 GB RAM`): the host's size beside it describes
the machine, not whose memory ran out."""
_HOST_RAM_NEEDS = WordGate("kill", "memory", "ram", "kernel", "paging", "-9", "137", "内存", "被")
"""A word every match of _HOST_RAM holds (`-9` or `137` for an exit code): the pattern runs on every line of a log
until an OOM is found, and a line with none of them (a printed Trainer dict, a progress bar) skips it."""

_GPU_NAMED = re.compile(r"\b(?:CUDA|GPUs?|VRAM|cuDNN|cuBLAS|HBM|RTX|GTX|Titan|Tesla|Quadro|A10G?|A[34]0|A100|H100|H200|"
                        r"V100|P100|P40|T4|K80|K40|L4|L40S?|A\d000|[1-5]0[5-9]0(?:\s?(?:ti|super))?)\b|显存|显卡|ビデオ",
                        re.I)
"""Words that put an OOM on the card: the device (`CUDA out of memory`, `GPU memory`, `显存不足`) or a card's name
(`with 2080ti`, `on a V100`, `A6000`, `RTX 3090`)."""

_HOST_WORDS = r"RAM|(?:CPU|host|system|physical|main)\s+memory|swap"
"""The host's memory as people name it (with 内存, added where each pattern below is built): G7's and R34's words."""
_HOST_NAMED = re.compile(r"\b(?:" + _HOST_WORDS + r"|memory\s+limit|OOM[- ]?killer|killed|"
                         r"kernel\s+(?:restart(?:ed|s)?|died|crashe[sd]))\b|内存", re.I)
"""The host's memory in a person's words, or its kill (`the Ram gets exhausted`, `I requested 40G memory ... exceeded
this memory limit`, `Killed`, `内存不够`)."""
_ACCELERATOR = re.compile(r"\b(?:TPU|MPS|NPU|XPU|ROCm|HIP|graphics|cards?|device\s+memory|nvidia-smi)\b", re.I)
"""Words for a device beside _GPU_NAMED's (another accelerator, a graphics card, nvidia-smi's table): where a text
names one, its memory words may be the device's, and G7 and R34 read no host there."""
_HOST_MEMORY = re.compile(r"\b(?:" + _HOST_WORDS + r"|memory\s+limits?)\b|内存", re.I)
"""The host's memory named in a sentence (R34): _HOST_WORDS or a memory limit (`exceeding memory limits`)."""
_RUNS_OUT = re.compile(r"\b(?:use[sd]?\s+up|using\s+up|takes?\s+up|took\s+up|fill(?:s|ed|ing)?\s+up|exhaust\w*|"
                       r"run(?:s|ning)?\s+out|ran\s+out|full|max(?:ed)?\s+out|maximum|leak\w*|crash\w*|killed|"
                       r"increas\w*|grow\w*|explod\w*|blow\w*\s+up|not\s+enough|insufficient|exceed\w*|out\s+of)\b|"
                       r"不够|不足|爆|占满|溢出|泄[漏露]|增长|增加", re.I)
_SENTENCE_END = re.compile(r"(?<!\d)\.(?!\d)|[!?。！？]")


def _names_accelerator(text: str) -> bool:
    """Whether `text` names a GPU, a card or another accelerator (`我使用GPU训练`: no word boundary falls before GPU
    until a space is put in)."""
    spaced = cjk_spaced(text)
    return any(p.search(spaced) for p in (_GPU_NAMED, _CARD_MAKER, _ACCELERATOR))


def host_ran_out(line: str) -> bool:
    """R34: a sentence of a person's that names the host's memory and its running out, filling up, leaking or the
    process crashing or killed, and no GPU or accelerator (`the RAM usage keeps increasing until it crashes`, `Container
    killed by YARN for exceeding memory limits`, `内存不够`)."""
    return any(_HOST_MEMORY.search(sentence) and _RUNS_OUT.search(sentence) and not _names_accelerator(sentence)
               for sentence in _SENTENCE_END.split(line))


def host_told(text: str) -> str:
    """The first line of `text` that names the host's memory, where nothing in it names a GPU or another accelerator
    (G7): an OOM only words or the word model put there is the host's RAM. Empty when there is none."""
    if _names_accelerator(text):
        return ""
    found = _HOST_NAMED.search(text)
    if found is None:
        return ""
    start = text.rfind("\n", 0, found.start()) + 1
    end = text.find("\n", found.end())
    return text[start:end if end >= 0 else len(text)].strip()


_OOM_COUNTER = re.compile(r"\boom\b\s*[=:|]?\s*\d", re.I)
"""A logger's OOM counter among the metrics (fairseq's `oom=0`, `| oom 0 |`): a number, not someone saying an OOM
happened (an OOM it counted prints its own message)."""

_SAVE_IN_LINE = re.compile(r"(?<!load_)state_dict|save_pretrained|_save_checkpoint|safetensors", re.I)
"""The OOM's own line names a save (`model.state_dict()` gathered, `save_pretrained`), not a load (`load_state_dict`)."""


class OomFold:
    """The Advisor's reading of an OOM, line by line."""

    oom: Finding | None
    oom_after: str
    pasted: bool
    ctx: Context
    trace: TraceScanner
    text: TextWatch
    card_at_start: tuple[int | None, int | None]
    tf_pool: int | None
    host_oom: tuple[str, str, list[str], int] | None
    _items: list[Advice] | None
    _oom_open: str
    _oom_count: int
    _prev_text: str

    def _traceback_after_oom(self) -> None:
        """The traceback printed after the OOM line (a logger's message first, then its traceback) goes on until its
        exception: its innermost phase, not the first frame's, is where the OOM struck."""
        if self.oom is not None and self.trace.count == getattr(self, "_oom_count", self.trace.count):
            self.oom_after = self.trace.phase or self.oom_after
            if not self.oom.facts.get("merge") and self._merging(""):
                self.oom.facts["merge"] = True

    def _oom_message(self, line: str) -> tuple[str, bool]:
        """An OOM message in the line (or in it joined to the line before, where a wrap cut a phrase): (the line as
        read on, True when it was one)."""
        prev, self._prev_text = getattr(self, "_prev_text", ""), line  # getattr: an advisor pickled in an older index
        if self._oom_settled():
            # a later message (each rank's, the same again at its traceback's end) replaces no OOM kept with its
            # numbers and kind: it is known for one (the line read no further) and may tell where it struck, but its
            # nine sizes are not read again
            if not oom.is_oom_line(line):
                return line, False
            self._oom_open = ""
            self._later_oom_phase(line)
            return line, True
        report = oom.parse_oom(line)
        joined = oom.cut_phrase(prev, line) if report is None and self.oom is None and prev else ""
        if joined:  # `Resource exhausted: Out` / `of memory while ...`: parsed again only when the wrap joined them
            line, report = joined, oom.parse_oom(joined)
        if report is None or self.pasted and oom_words.denied_message(line):
            return line, False
        self._on_oom(report, line)
        self._oom_open = line if self.oom is not None and self.oom.facts["report"] is report and \
            oom.message_open(line) else ""
        return line, True

    def _oom_settled(self) -> bool:
        """Whether the OOM kept is the program's message with its kind known: no later message replaces it
        (`_on_oom`)."""
        first = self.oom.facts["report"] if self.oom is not None else None
        return first is not None and not first.said and first.kind != oom.UNKNOWN

    def _later_oom_phase(self, line: str) -> None:
        """A later OOM message that replaces no first: it tells where the first struck, where that was not known
        (the message again at its traceback's end, pasted above it too: the frames say where)."""
        if self.oom is not None and not self.oom.facts["phase"]:
            phase = self.ctx.phase or ("save" if _SAVE_IN_LINE.search(line) else "") or self.trace.phase
            if phase:
                self.oom.facts["phase"] = phase
                self._items = None

    def _host_oom(self, line: str) -> None:
        """The host's memory ran out (not the GPU's), and the phase it struck in once a traceback names it."""
        slurm = _HOST_RAM_NEEDS.passes(line) and oom.SLURM_OOM.search(line) is not None
        if getattr(self, "host_oom", None) is None and (self.oom is None or self._words_only_oom()) and \
                (_HOST_RAM_NEEDS.passes(line) and (_HOST_RAM.search(line) or slurm or
                                                   self.pasted and not looks_like_code(line) and host_ran_out(line)) and
                 not _ON_DEVICE.search(line) or
                 self.pasted and oom_words.machine_down(line) and not looks_like_code(line) or
                 self._sized_host(line)):
            # an OOM the person only named, with no GPU in their words (`I'm running out of memory when pickling`),
            # is this one: the kill or the host's words say whose memory ran out
            self.oom = None
            phase, evidence = (self.trace.phase, []) if self.trace.phase else self.text.where.phase()
            self.host_oom = (quoted(line), phase, evidence, self.ctx.step)
            self._items = None
        host = getattr(self, "host_oom", None)
        if slurm and host is not None and self.oom is None and not oom.SLURM_OOM.search(host[0]):
            self.host_oom = (quoted(line), *host[1:])  # Slurm's own word names the limit (its --mem), a kill did not
            self._items = None
            host = self.host_oom
        if host is not None and not host[1] and self.oom is None and self.trace.phase in ("save", "eval"):
            self.host_oom = (host[0], self.trace.phase, [], host[3])  # the traceback printed after the message
            self._items = None

    def _sized_host(self, line: str) -> bool:
        """A size of the host's memory told after the person's own word for an OOM, where neither names a GPU: the
        host's RAM ran out."""
        return self.pasted and self.oom is not None and self._words_only_oom() and \
            _HOST_SIZED.search(line) is not None and not _GPU_NAMED.search(line) and not _CARD_MAKER.search(line) and \
            not _ON_DEVICE.search(line) and not looks_like_code(line)

    def _words_only_oom(self) -> bool:
        """Whether the OOM kept is only the person's word for one, and their words name no GPU (`killed cuz out of
        memory (64GB)`, `out of memory problem`): a host's kill read with it says it was the host's RAM."""
        report = self.oom.facts["report"] if self.oom is not None else None
        return report is not None and report.said and report.kind == oom.UNKNOWN and not _GPU_NAMED.search(report.text)

    def _oom_in_words(self, line: str) -> None:
        """A pasted text whose person says an OOM happened, or gives an account of what held the memory."""
        lowered = line.lower()
        if getattr(self, "host_oom", None) is not None and not _GPU_NAMED.search(line):
            return  # the host's kill or RAM was named first: the person's `out of memory` is that one
        if self.oom is None and ("oom" in lowered or "memory" in lowered or "alloc" in lowered or "vram" in lowered or
                                  "gpu ram" in lowered or "存" in line or "空间" in line or "メモリ" in line) and \
                self.pasted and oom_words.said_oom(line) and not looks_like_code(line) and "File " not in line and \
                not _OOM_COUNTER.search(line) and not oom.not_a_device(line):
            self._on_oom(oom.OomReport(kind=oom.UNKNOWN, text=line.strip()[:600], said=True), line)
            if self._sized_host(line):
                self._host_oom(line)  # the OOM's own line sizes the host's memory (`I only have a 32G CPU`)
        cause = getattr(self.text.where, "cause", None)  # getattr: an advisor pickled in an older events.idx
        if self.oom is None and self.pasted and cause is not None and cause[1] == quoted(line) and \
                _ABOUT_MEMORY.search(getattr(self.text.where, "_cause_words", "") or line):
            # the person's account of what held the memory (`nvidia-smi still shows 15 GB used after I killed the
            # script`, `83 GB reserved vs 49 GB allocated`) is the OOM's story even where no sentence names the OOM
            self._on_oom(oom.OomReport(kind=oom.UNKNOWN, text=line.strip()[:600], said=True), line)

    def _on_oom(self, report: oom.OomReport, line: str) -> None:
        """Keep the first OOM; a later one with numbers replaces a first one without."""
        ctx = self.ctx
        if report.kind == oom.UNKNOWN and not report.said and \
                oom.cuda_starting([n for f in list(self.trace.frames)[-2:] for n in (f.func, f.call)]):
            report = replace(report, kind=oom.OTHER_PROCESS, note=oom.CONTEXT_NOTE)
        first = self.oom.facts["report"] if self.oom is not None else None
        if first is not None and not first.said and (first.kind != oom.UNKNOWN or report.kind == oom.UNKNOWN):
            self._later_oom_phase(line)
            return  # the program's own message replaces the words of the person who pasted it
        phase = ctx.phase or ("save" if _SAVE_IN_LINE.search(line) else "") or self.trace.phase
        load = "load" if ctx.state == events.LOADING and not ctx.began else ""
        self.oom = Finding("oom", ctx.step, {"report": report, "phase": phase,
                                             "load": load, "others": ctx.other_pids(),
                                             "names": dict(ctx.gpu_names), "merge": self._merging(line)})
        self._oom_count = self.trace.count
        # the status the text showed when the OOM struck (the person's words may come before the log they paste)
        self.text.where.frozen = not report.said
        self.oom_after = ""
        self._items = None

    def _card_facts(self, line: str) -> None:
        """What the text says of the card apart from the OOM's message: its memory at start (TensorFlow's device
        report), and a context that could not be created in the lines after an OOM without numbers."""
        if "emory:" in line:
            total, free = oom_start.memory_at_start(line)
            known = getattr(self, "card_at_start", (None, None))
            self.card_at_start = (total or known[0], free if free is not None else known[1])
        if "TensorFlow device" in line and self.oom is None:
            self.tf_pool = oom_start.tf_pool(line) or getattr(self, "tf_pool", None)
        if self.oom is not None and self.oom.facts["report"].kind == oom.UNKNOWN and \
                not self.oom.facts["report"].said and self.trace.count <= getattr(self, "_oom_count", 0) + 1 and \
                oom.context_failed(line):
            self.oom.facts["report"] = replace(self.oom.facts["report"], kind=oom.OTHER_PROCESS, note=oom.CONTEXT_NOTE)
            self._items = None

    def _merging(self, line: str) -> bool:
        """Whether the OOM struck while an adapter was merged into its model: a frame's function or call, the
        cell or script around the load, the status line before it (`Unsloth: Merging 4bit and LoRA weights`)."""
        names = " ".join(f"{f.func} {f.call}" for f in self.trace.frames)
        banner = self.text.where.banner_line
        exports_adapter = "adapter" in banner and "export" in banner.lower()  # LLaMA-Factory's export merges it
        merge = MERGE
        return bool(merge.search(names) or merge.search(line) or merge.search(banner) or exports_adapter
                    or merge.search(getattr(self.trace, "writes_out", "")))

    def _oom_wrapped(self, line: str) -> bool:
        """A line that goes on with the OOM message wrapped over it: the report is read again from the whole
        message (its numbers and so its kind). True when the line was one."""
        joined = oom.continued(self._oom_open, line)
        report = oom.parse_oom(joined) if joined is not None else None
        if report is None or self.oom is None:
            self._oom_open = ""
            return False
        self.oom.facts["report"] = report
        self._oom_open = joined if oom.message_open(joined) else ""  # type: ignore[assignment]
        self._items = None
        return True

    def oom_phase(self) -> tuple[str, list[str]]:
        """Where the OOM struck: the run's phase events, the OOM line or its traceback's frames, else what the
        text says (a Trainer banner, a checkpoint named at the last step, the user's words), else loading."""
        assert self.oom is not None
        facts = self.oom.facts
        phase = facts["phase"] or self.oom_after
        if phase:
            return phase, []
        phase, evidence = self.text.where.phase()
        return (phase, evidence) if phase else (facts["load"], [])
