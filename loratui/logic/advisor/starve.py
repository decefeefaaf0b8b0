"""Data starvation read the way a maintainer reads it, from text with no telemetry: the watch (StarveText) that
joins the user's own words (starve_said.py: the GPU's utilisation low, idle or oscillating, delays between batches,
a CPU at 100% while the GPU idles, a slow loader or slow storage; English or Chinese) with the readers of GPU
utilisation sampled in the text (starve_gpu_util.py) and of what programs and profilers printed (starve_output.py)
into at most one finding; and the advice for every data_starved finding read from text (these, and TextWatch's:
the DataLoader's warnings, an idle GPU in nvidia-smi, a timed wait for data, a long preprocessing). Pure: lines in,
findings out, bounded state."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from loratui.logic.advisor.advice import INFO, Advice, Finding, more_workers_change
from loratui.logic.advisor.prep_words import BAR_WORDS, TOKENISING
from loratui.logic.advisor.starve_gpu_util import DIP, UtilSamples
from loratui.logic.advisor.starve_output import (
    PROFILE_WORDS,
    InputWaits,
    LoaderTimer,
    MegatronTimers,
    ProfileTable,
    RateWatch,
    StackWait,
    TimingTable,
    WaitShare,
    input_bound,
    open_bar,
)
from loratui.logic.advisor.starve_measured import measured
from loratui.logic.advisor.starve_pace import PaceTable, same_pace_said
from loratui.logic.advisor.starve_said import ON_CPU, PROGRAM, code_line, said_starved
from loratui.logic.advisor.starve_timed import timed_parts
from loratui.logic.clauses import DENIED
from loratui.recipe import Recipe
from loratui.logic.fmt import quoted
from loratui.logic.word_gate import WordGate

# -- the user's words that the watch reads over lines (one line's: starve_said.py) --------------------------

_ITERATION = re.compile(r"\[\s*\d+\s*/\s*\d+\s*\]|\b(?:iter(?:ation)?|step|batch)\b\s*[:#=]?\s*\d+|"
                        r"\d+/\d+\s*\[[\d:]+<", re.I)
"""A logged training iteration (`Epoch: [1][2/10000] Time 0.42`, `iter 120`, a tqdm bar)."""
_ITERATION_NEEDS = WordGate("/", "iter", "step", "batch")
"""What every match of _ITERATION holds (its first and last alternatives a `/`): a printed Trainer dict skips it."""


_COUNTER = re.compile(r"\[\s*\d+\s*/\s*\d+\s*\]|\b(?:iter(?:ation)?|step|batch|epoch)\b\s*[:#=]?\s*\d+(?![.\d])|"
                      r"\d+/\d+\s*\[[\d:]+<", re.I)
"""A program's iteration counter (`[2/10000]`, `iter 120`, a tqdm bar): its timers are read over many lines (text.py's
meter), not from the first, which may be the loader's warm-up."""


_SLOW_SAID = re.compile(r"\b(?:training|speed|it|throughput|epochs?|iterations?)\b[^.!?\n]{0,30}?\b(?:is|was|are|were|"
                        r"becomes?|became|gets?|got)\s+(?:(?:very|so|too|really|extremely|quite|pretty|still|even)\s+)*"
                        r"slow\b",
                        re.I)
_LOADER_BLAMED = re.compile(r"\b(?:reason|cause[ds]?|because|due to)\b[^.!?\n]{0,80}?(?:[Dd]ata ?[Ll]oad\w*|"
                            r"Iterable ?Data[Ss]et|streaming|data pipeline|input pipeline|__getitem__|"
                            r"(?:heavy |expensive |costly |on-the-fly |online )?(?:transforms?|augmentations?)\b|"
                            r"(?:image |video |audio )?decoding)")
"""The loader named as the reason (`the reason was because HuggingFace Trainer used DispatchDataloader to read
Iterable DataSet`)."""
_LOADER_TUNED = re.compile(r"\b(?:num_workers|pin_memory|prefetch_factor|persistent_workers|dataloader_num_workers|"
                           r"preprocessing_num_workers|--workers)\b")
"""The loader's knobs named by a user whose training is slow: the thread is about the loader (`I set num_workers=8
but it is still slow`)."""


_CPU_DEVICE = re.compile(r"\bUsing\s+(?:device\s*[:=]?\s*)?['\"]?cpu\b|(?-i:^\s*Device:\s*cpu\s*$)|"
                         r"\bGPU available:\s*False\b|\bno accelerator is found\b", re.I)
"""A program's line that says the run is on the CPU (`Using device: cpu`, accelerate's `Device: cpu`, Lightning's
`GPU available: False`, torch's pin_memory warning that no accelerator is found): a wait for data there is the
CPU's, and no GPU is in the text to wait. A config's `"device": "cpu"` or `device: cpu` (DeepSpeed's offload) is not
one: accelerate's line is matched with its capital only."""


_GPU_WORDS = ("GPU", "gpu", "CUDA", "cuda", "nvidia", "NVIDIA", "VRAM", "NCCL", "显卡", "显存")
"""Words that put a GPU in the text."""


_MEMORY_WORDS = re.compile(r"\b(?:memory|VRAM|GiB|GB|OOM|leak\w*)\b|显存|内存", re.I)
_SPEED_WORDS = re.compile(r"\b(?:slow\w*|speed\w*|fast\w*|util\w*|usage|idle|wait\w*|throughput|it/s|s/it|bottleneck\w*|"
                          r"stall\w*|hang\w*|stuck)\b|慢|利用率|使用率|卡", re.I)


# -- the watch ---------------------------------------------------------------------------------------------


@dataclass
class StarveText:
    """The text's signs of a GPU waiting for data, as at most one finding."""

    util: UtilSamples = field(default_factory=UtilSamples)
    profile: ProfileTable = field(default_factory=ProfileTable)
    loader: LoaderTimer = field(default_factory=LoaderTimer)
    table: TimingTable = field(default_factory=TimingTable)
    rate: RateWatch = field(default_factory=RateWatch)
    megatron: MegatronTimers = field(default_factory=MegatronTimers)
    stack: StackWait = field(default_factory=StackWait)
    wait: WaitShare = field(default_factory=WaitShare)
    inputs: InputWaits = field(default_factory=InputWaits)
    pace: PaceTable = field(default_factory=PaceTable)
    _after_iteration: bool = False  # the last non-empty line logged an iteration
    _slow_said: str = ""  # the user's line that says the training is slow
    _blamed_line: str = ""  # the user's line that names the loader as the reason
    _blame_done: bool = False
    _util_done: bool = False
    _timed_done: bool = False  # a line timed the data's part against the model's (starve_timed)
    _on_cpu: str = ""  # a person's or a program's line that puts the run on the CPU: an idle GPU in words later is
    # no starvation, and the advice names no GPU
    _gpu_named: bool = False  # a line so far names a GPU (else the advice says training waits, not the GPU)
    _memory_asked: bool = False  # the person's words are about memory
    _speed_asked: bool = False  # the person's words are about speed or utilisation

    def _blamed(self, line: str, step: int) -> list[Finding]:
        """The user names the loader as the reason, and says elsewhere that training is slow (two lines)."""
        slow = _SLOW_SAID.search(line) if not self._slow_said else None
        if slow and not DENIED.search(slow.group(0)) and not PROGRAM.search(line):  # `doesn't help, still slow`
            self._slow_said = quoted(line)
        if not self._blamed_line and (_LOADER_BLAMED.search(line) or _LOADER_TUNED.search(line)) and \
                not code_line(line) and not PROGRAM.search(line):
            self._blamed_line = quoted(line)
        if self._slow_said and self._blamed_line and not self._blame_done:
            self._blame_done = True
            quote = self._slow_said + (" / " + self._blamed_line if self._blamed_line != self._slow_said else "")
            return [Finding("data_starved", step, {"text": "said", "said": "loader", "quote": quote[:400]})]
        return []

    def slow_said(self) -> str:
        """The user's line that says the training is slow (empty when none did yet): a timer line or two then
        shows where the time goes."""
        return self._slow_said

    def at_end(self, step: int) -> Finding | None:
        """What only the whole text can say: a pasted snapshot or two of nvidia-smi with every GPU nearly idle."""
        few = self.util.few() if not self._util_done and not self.memory_only() else None
        return self._device(Finding("data_starved", step, few)) if few is not None else None

    def memory_only(self) -> bool:
        """The person's words so far ask about memory, never about speed: a snapshot's low utilisation was taken
        to show what is held, at any moment (between steps, after training), and says nothing of the feed."""
        return self._memory_asked and not self._speed_asked

    def _asked(self, line: str) -> None:
        """What the person's own words are about: memory (a snapshot then shows how much is held, taken at any
        moment) or speed (a snapshot then shows the GPU idle while it should work)."""
        if self._speed_asked or "{" in line or "|" in line or code_line(line) or PROGRAM.search(line):
            return  # once speed is asked, memory is never asked alone
        self._memory_asked = self._memory_asked or bool(_MEMORY_WORDS.search(line))
        self._speed_asked = self._speed_asked or bool(_SPEED_WORDS.search(line))

    def line(self, line: str, step: int) -> list[Finding]:
        if not line.strip():
            return []
        opened = open_bar(line) if "/s]" in line and "<" not in line else None  # preparing data for long, no total
        facts = [self._sampled(line), *self._read(line), input_bound(line), opened]
        found = [Finding("data_starved", step, f) for f in facts if f is not None]
        if len(line) < 2000 and ("slow" in line or "reason" in line or "because" in line or "due to" in line or
                                 "cause" in line or "work" in line or "pin_memory" in line or "prefetch" in line):
            found += self._blamed(line, step)
        if len(line) < 2000:
            self._asked(line)
        found += [Finding("data_starved", step, f) for f in (self._timed(line), self._said(line), self._measured(line))
                  if f is not None]
        self._after_iteration = _ITERATION_NEEDS.passes(line) and bool(_ITERATION.search(line))
        if not self._on_cpu and ("cpu" in line or "CPU" in line or "False" in line or "accelerator" in line) \
                and len(line) < 2000 and _CPU_DEVICE.search(line):
            self._on_cpu = quoted(line)
        self._gpu_named = self._gpu_named or any(word in line for word in _GPU_WORDS)
        return [self._device(f) for f in found]

    def _device(self, finding: Finding) -> Finding:
        """The finding, told where the text put the run before it: the line that says it is on the CPU, or that
        no line named a GPU (a CPU run's log names none)."""
        if self._on_cpu:
            return Finding(finding.id, finding.step, dict(finding.facts, on_cpu=self._on_cpu))
        return finding if self._gpu_named else Finding(finding.id, finding.step, dict(finding.facts, no_gpu=True))

    def _sampled(self, line: str) -> dict[str, object] | None:
        """The GPU's utilisation sampled (its verdict once), else a profiler's table row."""
        if self.util.line(line):
            verdict = self.util.verdict() if not self._util_done else None
            self._util_done = self._util_done or verdict is not None
            return verdict
        return self.profile.line(line) if PROFILE_WORDS.passes(line) else None

    def _read(self, line: str) -> list[dict[str, object] | None]:
        """What each program-output reader finds in the line, each asked only when a cheap test says the line may
        be for it (this runs on every line of a log)."""
        readers = (
            ("ime" in line or "IME" in line or "Loaded:" in line, self.loader), ("|" in line, self.table),
            (("it/s" in line or "s/it" in line or bool(self.rate.rates)) and not self.rate.done and
             len(self.rate.rates) < 4096, self.rate),
            ("batch-generator" in line or "forward-backward" in line, self.megatron),
            ("Traceback" in line or "KeyboardInterrupt" in line or "Thread " in line or "Process " in line or
             "most recent call first" in line or "dataloader.py" in line or "arrow_dataset.py" in line, self.stack),
            ("%" in line and ("wait" in line or "stall" in line or "bound" in line), self.wait),
            ("shuffle buffer" in line or "mapping (seconds)" in line, self.inputs))
        return [reader.line(line) if wanted else None for wanted, reader in readers]

    def _timed(self, line: str) -> dict[str, object] | None:
        """The person's own timing of the data's part against the model's (starve_timed), once; a program's
        timers (a dict, a rate, a logger's line, an iteration counter) are read over many lines instead."""
        if self._timed_done or not ("s" in line or "秒" in line) or "{" in line or "it/s" in line or \
                "s/it" in line or PROGRAM.search(line) or _COUNTER.search(line):
            return None
        timed = timed_parts(line)
        self._timed_done = timed is not None
        return timed

    def _measured(self, line: str) -> dict[str, object] | None:
        """The data's preparation timed or rated as slow (starve_measured), in a person's words or a program's line;
        the step's pace that does not follow the model's size (starve_pace)."""
        low = line.lower()
        found = measured(line) if any(w in low for w in ("token", "bpe", "pack", "process", "map", "prepar", "load",
                                                         "read", "fetch", "get", "wait", "collat", "stream", "worker",
                                                         "nfs", "drive", "pin_memory", "prefetch", "culprit",
                                                         "turn", "caused", "数据", "分词", "处理", "流式", "io",
                                                         "磁盘", "硬盘")) else None
        if found is None and "|" in line:
            found = self.pace.line(line)
        if found is None and any(w in low for w in ("speed", "/it", "s/iter", "time", "pace", "throughput", "slow",
                                                    "fast", "速度")):
            found = same_pace_said(line)
        return dict(found, text="said") if found is not None else None

    def _said(self, line: str) -> dict[str, object] | None:
        """Starvation in the person's words; an idle GPU or a busy CPU said of a run on the CPU is none."""
        said = said_starved(line, self._after_iteration) if len(line) < 2000 else None
        if not self._on_cpu and ("cpu" in line.lower() or "process" in line or "available" in line) and \
                ON_CPU.search(line):
            self._on_cpu = quoted(line)
        if said is None or said["said"] in ("util", "cpu_busy") and self._on_cpu:
            return None
        return dict(said, text="said")


# -- the advice --------------------------------------------------------------------------------------------

_SAID_TITLE = {
    "util": "the GPU's utilisation is low or swings between busy and idle",
    "loader": "data loading is the slow part",
    "storage": "the data is read from slow storage",
    "delay": "the run pauses between batches while each step itself is quick",
    "cpu_busy": "the CPU is saturated while the GPU idles",
    "preprocessing": "preprocessing the dataset takes a long time before or between training",
    "slowdown": "the same training takes several times longer than it used to (check where the data is read from)",
    "stack_loader": "the run was caught waiting in the DataLoader for its next batch",
    "stack_preprocessing": "the run was caught in the dataset's map (preprocessing) before training",
}


_NOT_WORKERS = {
    "cpu_busy": "make batches cheaper to prepare (pre-tokenise, pre-decode): with every CPU busy more workers "
                "will not help",
    "preprocessing": "tokenise with map(batched=True) and num_proc, once, and reuse the saved set (save_to_disk, "
                     "LLaMA-Factory tokenized_path)",
    "stack_preprocessing": "tokenise with map(batched=True) and num_proc, once, and reuse the saved set (save_to_disk, "
                           "LLaMA-Factory tokenized_path)",
    "storage": "copy the data to fast local disk (or cache decoded samples) before training",
    "slowdown": "check where the data is read from (a network or Google Drive mount throttles): copy it to local "
                "disk, then raise the loader's workers",
}
"""The change when more loader workers are not it: the words say the cost is elsewhere."""


def starve_text_advice(f: Finding, r: Recipe | None) -> Advice:
    """The GPU waits for the next batch: more loader workers, cheaper batches, faster storage."""
    facts = f.facts
    key = "dataloader_num_workers" if r is not None else \
        "dataloader_num_workers (TrainingArguments) or num_workers (DataLoader)"
    gpu = not facts.get("no_gpu")  # nothing in the text names a GPU: the run's steps wait, wherever they run
    what, evidence = _starve_what(facts, gpu)
    if facts.get("on_cpu"):
        return _cpu_waits(f, what, evidence, key)
    other = _NOT_WORKERS.get(str(facts.get("said", "")))
    evidence += [("a GPU that waits between steps is fed too slowly" if gpu else
                  "steps that wait for their batch are fed too slowly") + ": the loader, not the model, sets the pace",
                 "make each batch cheap: tokenise/decode once ahead of training (save_to_disk), keep the data on "
                 "fast local disk, pin_memory" + (", and raise the workers" if other is None else "")]
    change = more_workers_change(r) if other is None else {}
    title = f"{'The GPU' if gpu else 'Training'} waits for data ({what}): " + (other or f"raise {key}")
    return Advice("data_starved", INFO, title, evidence, change, f.step)


def _cpu_waits(f: Finding, what: str, evidence: list[str], key: str) -> Advice:
    """The same signs in a run the text puts on the CPU: no GPU waits, and the loader's workers take the cores the
    training computes on, so another process on them slows every step as a slow loader would."""
    evidence = [line for line in evidence if "GPU" not in line and "nvidia-smi" not in line]
    evidence += [f"the run is on the CPU: {f.facts['on_cpu']}",
                 ("the loader's workers and the training share the CPU's cores: another process on them (top) slows "
                  "every step as a slow loader does"),
                 ("make each batch cheap: tokenise/decode once ahead of training (save_to_disk), keep the data on fast "
                  "local disk")]
    title = f"Training on the CPU waits ({what}): check what else uses its cores (top), then raise {key} if some " \
            "are idle"
    return Advice("data_starved", INFO, title, evidence, {}, f.step)


def text_starve_advice(f: Finding, r: Recipe | None) -> Advice:
    """A DataLoader warning or an idle GPU in nvidia-smi: the change is the worker count."""
    facts = f.facts
    if facts["text"] in ("said", "util_samples", "profile", "loader_time", "rate_drop", "timed_parts"):
        return starve_text_advice(f, r)
    key = "dataloader_num_workers" if r is not None else "dataloader_num_workers (TrainingArguments) or " \
        "num_workers (DataLoader)"
    return _WARNED.get(str(facts["text"]), _few_workers)(f, r, key)


def _many_workers(f: Finding, r: Recipe | None, key: str) -> Advice:
    facts = f.facts
    title = (f"{facts['workers']} DataLoader workers on a machine that suggests at most {facts['suggest']}: "
             f"lower {key} to {facts['suggest']} (too many workers slow the loader or freeze it)")
    change = {"training.dataloader_num_workers": facts["suggest"]} if r is not None else {}
    return Advice("data_starved", INFO, title, [facts["line"]], change, f.step)


def _data_time(f: Finding, r: Recipe | None, key: str) -> Advice:
    facts = f.facts
    share = facts["data"] / facts["time"]
    over = "on average" if facts["average"] else f"over {facts['lines']} timed steps"
    title = (f"{share:.0%} of the time waits for data ({over}: {facts['data']:.4g} s of {facts['time']:.4g} s): "
             f"the loader is the bottleneck; raise {key}")
    evidence = [facts["line"], "the data timer is the wait for the next batch, the step timer the work",
                "or make __getitem__ cheaper (decode and tokenise once, ahead of training; fast local disk)"]
    return Advice("data_starved", INFO, title, evidence, more_workers_change(r), f.step)


def _preprocessing(f: Finding, r: Recipe | None, key: str) -> Advice:
    facts = f.facts
    title = (f"Dataset preprocessing takes about {facts['minutes']:.0f} min ({facts['rate']:g} {facts['unit']}) "
             "while the GPUs wait: " + ("tokenise once and reuse it" if TOKENISING.search(str(facts["desc"])) or
                                        not BAR_WORDS.search(str(facts["desc"])) else
                                        "prepare the data once (cached, on fast local disk) and reuse it"))
    evidence = [facts["line"],
                "save the processed set (datasets save_to_disk, LLaMA-Factory tokenized_path) and load it on "
                "the next run; raise num_proc / preprocessing_num_workers where CPUs are free",
                "under DDP the other ranks wait in a collective meanwhile: raise ddp_timeout (seconds) above "
                "the preprocessing time, or preprocess before launching"]
    return Advice("data_starved", INFO, title, evidence, {}, f.step)


def _idle_gpu(f: Finding, r: Recipe | None, key: str) -> Advice:
    facts = f.facts
    title = (f"The GPU is {facts['util']}% busy with {facts['used_mib']} MiB in use: if training is running, "
             f"it waits for data; raise {key}")
    evidence = [facts["line"], "check the rate (it/s) with more workers; pre-tokenise the data"]
    return Advice("data_starved", INFO, title, evidence, more_workers_change(r), f.step)


def _few_workers(f: Finding, r: Recipe | None, key: str) -> Advice:
    number = f.facts.get("suggest")
    title = f"The DataLoader has too few workers, a bottleneck: raise {key}" + (
        f" (the warning suggests {number})" if number else "")
    return Advice("data_starved", INFO, title, [f.facts["line"]], more_workers_change(r), f.step)


def _queue_empty(f: Finding, r: Recipe | None, key: str) -> Advice:
    return Advice("data_starved", INFO, "The data layer had no batch ready when the net asked (Caffe's prefetch "
                  "queue ran empty): where it repeats, or the data layer's forward takes seconds, the input pipeline "
                  "sets the pace: more prefetch threads, a lighter augmentation, data on faster storage (LMDB on a "
                  "local SSD)", [f.facts["line"], "once, at the first iteration, is the queue filling up"], {}, f.step)


_WARNED = {"many_workers": _many_workers, "data_time": _data_time, "preprocessing": _preprocessing,
           "idle_gpu": _idle_gpu, "queue_empty": _queue_empty}
"""The advice for each kind of TextWatch's data_starved finding (any other: the DataLoader's few-workers warning)."""


def _starve_what(facts: dict[str, object], gpu: bool) -> tuple[str, list[str]]:
    """What the evidence says, in words for the title, and the lines that show it (`gpu`: the text names one)."""
    kind = facts["text"]
    if kind == "util_samples":
        n = facts["n"]
        return (f"the GPU is {facts['mean']:.0f}% busy on average over {n} reading{'s' * (n != 1)} "
                f"({facts['low']}-{facts['high']}%, {facts['dips']} at or under {DIP}%)"), [str(facts["line"])]
    if kind == "loader_time":
        return f"the loader takes {facts['mean']:.3g} s per step on average over {facts['lines']} steps", \
            [str(facts["line"])]
    if kind == "rate_drop":
        return (f"the training bar slowed from {_pace(float(facts['before']))} to {_pace(float(facts['now']))} and "
                f"stayed there over {facts['n']} readings"), \
            [str(facts["line"]), "the same steps got slower while nothing else in the log changed: " +
             ("check the GPU's utilisation (nvidia-smi) to confirm it waits" if gpu else
              "on a GPU, check its utilisation (nvidia-smi) to confirm it waits; on the CPU, check what else uses "
              "its cores (top)")]
    if kind == "timed_parts":
        return f"the data takes {facts['data']:.3g} s of every {facts['whole']:.3g} s step, as timed", \
            [str(facts["line"])]
    if kind == "profile":
        return f"fetching the next batch takes {facts['share']:g}% of the profiled time", [str(facts["line"])]
    return "as the text says, " + _SAID_TITLE[str(facts["said"])], [str(facts["quote"])]


def _pace(seconds: float) -> str:
    """tqdm's way: `2.50it/s` under a second per step, else `3.20s/it`."""
    return f"{1 / seconds:.2f}it/s" if seconds < 1 else f"{seconds:.2f}s/it"
