"""Data starvation read the way a maintainer reads it, from text with no telemetry: the user's own words about
the GPU's utilisation (low, idle, oscillating; English or Chinese), about delays between batches, a CPU at
100% while the GPU idles, a slow loader or slow storage; GPU utilisation sampled several times (nvidia-smi
tables, gpustat, `nvidia-smi dmon`, `--query-gpu` CSV); a profiler table where fetching the next batch takes
a large share of the time. Pure: lines in, findings out, bounded state."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from loratui.logic.advisor.advice import INFO, Advice, Finding
from loratui.recipe import Recipe

# -- the user's words ------------------------------------------------------------------------------------

_UTIL = (r"(?:(?<![A-Za-z])GPUs?|显卡|(?<![A-Za-z])cuda)[\s\-_']{0,3}(?:s\s+)?(?:util\w*|usage|load|activity|busy|利用率|使用率|占用率)|"
         r"\bVolatile GPU-Util|\bSM (?:util\w*|activity)|\butili[sz]ation of (?:the |my |our )?GPUs?")
"""The GPU's utilisation by name (`GPU util`, `GPU-utilization`, `GPU usage`, nvidia-smi's `Volatile GPU-Util`,
`GPU利用率`); not its memory (`GPU memory usage` has a word between)."""
_LOW = (r"(?:very |quite |extremely |really |so |too |pretty )?(?:low|lower|poor|bad|idle|underutili[sz]ed|"
        r"under[- ]utili[sz]ed|not (?:fully )?(?:used|utili[sz]ed)|zero|spiky|spikes?|spiking|oscillat\w*|"
        r"fluctuat\w*|jump\w*|jitter\w*|unstable|up and down|intermittent\w*|drops? (?:to|down)|"
        r"很低|较低|偏低|低|不高|上不去|波动|忽高忽低|时高时低|一直是?0|为0|只有|仅)")
"""What a starved GPU's utilisation does: stays low, or swings between busy and idle."""
_PCT = r"(\d{1,3})\s*%"
_UTIL_SAID = re.compile(
    r"(?P<util>" + _UTIL + r")(?P<gap>[^.!?\n;。！？]{0,50}?)(?:(?P<low>" + _LOW + r")|" + _PCT + r")|"
    r"(?P<low2>" + _LOW + r")\s+(?:\w+\s+){0,2}?(?:" + _UTIL + r")|"
    r"(?<![A-Za-z])GPUs?\b[^.!?\n,;]{0,20}?\b(?P<low3>under-?utili[sz]ed|not (?:fully )?utili[sz]ed|starv\w*)", re.I)
_RANGE = re.compile(r"(\d{1,3})\s*%?\s*(?:-|~|to|and|–)\s*(\d{1,3})\s*%")
_HELD = re.compile(r"\b(?:not?|never|isn't|aren't|wasn't|without|high|higher|full|fully|100%)\s*$", re.I)
"""A word just before the verdict that denies it (`GPU utilisation is not low`)."""
_GAP_OTHER = re.compile(r"\b(?:memory|mem|VRAM|RAM|CPU|temperature|temp|power|fan|disk|network)\b|显存|内存", re.I)
"""Another quantity named between the GPU's utilisation and the verdict: that quantity is low, not the GPU's."""
_CPU_BUSY = re.compile(r"\bCPU[\w\s\-]{0,20}?(?:\b(?:100|9\d)\s*%|\bmax(?:ed)? out|\bfully (?:used|loaded)|\bbottleneck)|"
                       r"CPU[\w\s]{0,10}(?:占满|满载|瓶颈)", re.I)
_GPU_IDLE = re.compile(r"\bGPUs?\b[\w\s\-]{0,20}?\b(?:idle|idling|waiting|(?:is |are |at |only )?(?:[0-9]|[12]\d)\s*%)|"
                       r"GPU[\w\s]{0,10}(?:空闲|闲置)", re.I)
_LOADER_SLOW = re.compile(
    r"\b(?:data ?load(?:ing|er)s?|data pipeline|input pipeline|data ?reading|I/?O|__getitem__|collate\w*)\b"
    r"[^.!?\n]{0,40}?\b(?:is|are|was|were|seems?|becomes?|looks?|being)?\s*(?:the |a |very |so |too |really )*"
    r"(?:bottleneck\w*|slow\w*|(?:CPU|IO|I/O)[- ]bound)\b|"
    r"\b(?:bottleneck(?:ed)?|slowed down|limited)\s+(?:is |by |on |in )?(?:the )?(?:data ?load(?:ing|er)|I/?O|data "
    r"pipeline|input pipeline|data reading|disk)\b|"
    r"数据(?:加载|读取|预处理)[^。！？\n]{0,10}(?:慢|瓶颈)", re.I)
"""The loader named slow or the bottleneck, in the user's words (`data loading is the bottleneck`)."""
_STORAGE_SLOW = re.compile(
    r"\b(?:slow\w*|bottleneck\w*|crawl\w*|takes? (?:forever|ages)|very long)\b[^.!?\n]{0,60}?"
    r"\b(?:NFS|network (?:file ?system|drive|storage|disk|share)|s3|GCS|blob storage|Google Drive|mounted drive|"
    r"HDD|hard (?:disk|drive)|spinning disk|lustre|sshfs|shared file ?system)\b|"
    r"\b(?:NFS|network (?:file ?system|drive|storage|disk|share)|s3|GCS|Google Drive|mounted drive|HDD|hard (?:disk|"
    r"drive)|lustre|sshfs|shared file ?system)\b[^.!?\n]{0,60}?\b(?:slow\w*|bottleneck\w*|crawl\w*)\b", re.I)
"""Reading the data from slow storage (a network file system, a bucket, a spinning disk), in the user's words."""
_DELAY = re.compile(
    r"(?:\b(?:delay|pause|stall|lag|gap|freeze|hang|hiccup|wait)s?\b|停顿|卡顿|卡住)[^.!?\n]{0,40}?"
    r"(?:\bbetween\b[^.!?\n]{0,20}?\b(?:batch|iteration|iter|step|mini-?batch)|"
    r"\b(?:after|before|at) (?:every|each)\s+(?:\d+\s+)?(?:batch|iteration|iter|step)|"
    r"\bevery (?:few |\d+ )?(?:batch|iteration|iter|step)|(?:每|几)个?(?:batch|iter|step|迭代))", re.I)
"""A delay between batches in the user's words (the GPU step is quick; the wait is for the next batch)."""
_DELAY_HERE = re.compile(
    r"\b(?:\d+(?:\.\d+)?(?:\s*[~\-]\s*\d+(?:\.\d+)?)?|a few|several|a couple of)\s*(?:s|secs?|seconds?|minutes?|"
    r"mins?)\s+(?:of\s+)?(?:delay|pause|stall|lag|gap|wait|freeze)\b|"
    r"\b(?:delay|pause|stall|lag|gap|wait|freeze)s?\s+(?:of\s+)?(?:about |around |~)?\d+(?:\.\d+)?\s*(?:s|secs?|"
    r"seconds?)\b", re.I)
"""A delay of some seconds: starvation when it is written between two logged iterations."""
_DENIED = re.compile(r"\b(?:not|never|no longer|isn't|aren't|wasn't)\b|n't\b|[不没]", re.I)
"""Inside the words themselves: `data loading is not the bottleneck`."""
_ELSEWHERE = re.compile(r"\b(?:sav\w*|checkpoint\w*|eval\w*|validat\w*|logging|print\w*)\b|保存|验证", re.I)
"""A pause at a save, an evaluation or a log line is that work, not the loader."""
_ITERATION = re.compile(r"\[\s*\d+\s*/\s*\d+\s*\]|\b(?:iter(?:ation)?|step|batch)\b\s*[:#=]?\s*\d+|"
                        r"\d+/\d+\s*\[[\d:]+<", re.I)
"""A logged training iteration (`Epoch: [1][2/10000] Time 0.42`, `iter 120`, a tqdm bar)."""
_PROGRAM = re.compile(r"^\s*(?:\[?\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d|[A-Z]+:|\w+(?:Warning|Error)\b)|\{|"
                      r"\bwarnings\.warn|File \"")
"""A line the program printed (a logger prefix, a warning, a dict, a traceback frame), not the user's prose."""


def _code(line: str) -> bool:
    return bool(re.match(r"\s*(?:def |class |import |from |#|>>>|\$ |[\w.\[\]'\"]+\s*[-+*/]?=\s)", line))


def said_starved(line: str, after_iteration: bool) -> dict[str, object] | None:
    """The user's words that say the GPU waits for data, as facts (None when the line says nothing of it)."""
    if _code(line) or _PROGRAM.search(line):
        return None
    util = _util_said(line)
    if util is not None:
        return util
    for pattern, what in ((_LOADER_SLOW, "loader"), (_STORAGE_SLOW, "storage"), (_DELAY, "delay")):
        found = pattern.search(line)
        if found and not _HELD.search(line[:found.start()][-16:]) and not _DENIED.search(found.group(0)) and \
                not (what == "delay" and _ELSEWHERE.search(line)):
            return {"said": what, "quote": line.strip()[:300]}
    if _CPU_BUSY.search(line) and _GPU_IDLE.search(line):
        return {"said": "cpu_busy", "quote": line.strip()[:300]}
    if after_iteration and _DELAY_HERE.search(line):
        return {"said": "delay", "quote": line.strip()[:300]}
    return None


def _util_said(line: str) -> dict[str, object] | None:
    """`GPU utilization is low`, `GPU util 0-30%`, `spiky GPU utilization`, `GPU利用率很低`: the utilisation low or
    swinging in the user's words; a percentage counts when it is at most half (`oscillates between 60% - 100%`
    counts by its word, `GPU utilization is 100%` does not)."""
    for found in _UTIL_SAID.finditer(line):
        gap = found.group("gap") or ""
        if found.group("util") and _GAP_OTHER.search(gap):
            continue
        if _HELD.search(line[:found.start("low") if found.group("low") else found.start()][-20:]):
            continue
        if found.group("low") or found.group("low2") or found.group("low3"):
            return {"said": "util", "quote": line.strip()[:300]}
        span = line[found.start("util"):found.end() + 12]
        ranged = _RANGE.search(span)
        low = min(int(ranged.group(1)), int(ranged.group(2))) if ranged else int(found.group(found.lastindex or 0))
        if low <= 50:
            return {"said": "util", "quote": line.strip()[:300], "util": low}
    return None


# -- GPU utilisation sampled in the text -----------------------------------------------------------------

_SMI_ROW = re.compile(r"\|\s*(\d+)MiB\s*/\s*(\d+)MiB\s*\|\s*(\d+)%\s")
_GPUSTAT_ROW = re.compile(r"\d+\s*'?°?C,\s*(\d+)\s*%\s*\|\s*(\d+)\s*/\s*\d+\s*MB")
_CSV_HEADER = re.compile(r"utilization\.gpu", re.I)
_DMON_HEADER = re.compile(r"^\s*#\s*gpu\s+.*\bsm\b", re.I)
READINGS = 4
"""Utilisation readings enough to judge a GPU's average (one snapshot can fall between two busy steps)."""
LOW_MEAN = 50
DIP = 20
DIP_SHARE = 0.25
"""Starved: busy half the time or less on average, or a quarter of the readings in a dip (the loader stalls)."""


@dataclass
class UtilSamples:
    """GPU utilisation readings from nvidia-smi/gpustat snapshots, `nvidia-smi dmon` and `--query-gpu` CSV."""

    readings: list[int] = field(default_factory=list)  # utilisation of GPUs holding memory (a model loaded)
    lines: list[str] = field(default_factory=list)  # the first rows read, to quote
    _csv: tuple[int, int] | None = None  # (utilization column, memory.used column) of a CSV header
    _dmon: int | None = None  # the `sm` column of a dmon header

    def line(self, line: str) -> bool:
        """Fold one line in; True when it held a reading."""
        util = self._reading(line)
        if util is None or len(self.readings) >= 4096:
            return False
        self.readings.append(util)
        if len(self.lines) < 3:
            self.lines.append(line.strip()[:200])
        return True

    def _reading(self, line: str) -> int | None:
        smi = _SMI_ROW.search(line)
        if smi:
            return int(smi.group(3)) if int(smi.group(1)) >= 1024 else None
        gpustat = _GPUSTAT_ROW.search(line)
        if gpustat:
            return int(gpustat.group(1)) if int(gpustat.group(2)) >= 1024 else None
        if _DMON_HEADER.search(line):
            self._dmon = line.replace("#", " ").split().index("sm")
            return None
        if _CSV_HEADER.search(line) and "," in line:
            cells = [c.strip().lower() for c in line.split(",")]
            util = next(i for i, c in enumerate(cells) if c.startswith("utilization.gpu"))
            used = next((i for i, c in enumerate(cells) if c.startswith("memory.used")), -1)
            self._csv = (util, used)
            return None
        if self._dmon is not None and not line.lstrip().startswith("#"):
            cells = line.split()
            if len(cells) > self._dmon and cells[0].isdigit() and cells[self._dmon].isdigit():
                return int(cells[self._dmon])
        if self._csv is not None and "," in line:
            return self._csv_reading(line)
        return None

    def _csv_reading(self, line: str) -> int | None:
        assert self._csv is not None
        cells = [c.strip() for c in line.split(",")]
        util, used = self._csv
        if len(cells) <= max(util, used):
            return None
        number = re.match(r"(\d{1,3})\s*%?$", cells[util])
        memory = re.match(r"(\d+)\s*(?:MiB)?$", cells[used]) if used >= 0 else None
        if number is None or used >= 0 and (memory is None or int(memory.group(1)) < 1024):
            return None
        return int(number.group(1))

    def verdict(self) -> dict[str, object] | None:
        """Facts when the readings say the GPU waits: low on average, or often in a dip."""
        n = len(self.readings)
        if n < READINGS:
            return None
        mean = sum(self.readings) / n
        dips = sum(1 for u in self.readings if u <= DIP)
        if mean > LOW_MEAN and dips < DIP_SHARE * n:
            return None
        return {"text": "util_samples", "n": n, "mean": mean, "low": min(self.readings),
                "high": max(self.readings), "dips": dips, "line": " / ".join(self.lines)}


# -- profiler tables --------------------------------------------------------------------------------------

_FETCH = re.compile(r"DataLoader\w*\.__next__|DataLoaderIter\w*\.__next__|_next_data|enumerate\(DataLoader\)|"
                    r"dataloader_next|get_train_batch|\bcollate\w*|_MultiProcessingDataLoaderIter|fetch\b", re.I)
"""A profiler row that fetches the next batch: PyTorch's `enumerate(DataLoader)#_SingleProcessDataLoaderIter.
__next__`, Lightning's `[_TrainingEpochLoop].train_dataloader_next`, a collate function."""
_PERCENT = re.compile(r"(?<![\w.])(\d{1,3}(?:\.\d+)?)\s*%")
_PROFILE_WORDS = re.compile(r"Percentage|next|collate|fetch|DataLoader", re.I)
"""The cheap test before a profiler row is read (it runs on every line)."""
PROFILE_SHARE = 25.0
"""Fetching batches a quarter of the profiled time or more."""


@dataclass
class ProfileTable:
    """A profiler's table: the share of time the data-fetching rows take."""

    _share_col: int | None = None  # the `Percentage` column of Lightning's simple profiler

    def line(self, line: str) -> dict[str, object] | None:
        if "|" in line and re.search(r"Percentage", line):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            self._share_col = next(i for i, c in enumerate(cells) if "Percentage" in c)
            return None
        if not _FETCH.search(line):
            return None
        shares = [float(p) for p in _PERCENT.findall(line)]
        if not shares and self._share_col is not None and "|" in line:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            value = cells[self._share_col] if len(cells) > self._share_col else ""
            shares = [float(value)] if re.fullmatch(r"\d{1,3}(?:\.\d+)?", value) else []
        share = max((s for s in shares if s <= 100), default=0.0)
        if share < PROFILE_SHARE:
            return None
        return {"text": "profile", "share": share, "line": line.strip()[:300]}


_INPUT_BOUND = re.compile(r"input-bound because (\d+(?:\.\d+)?)\s*% of the total step time sampled is waiting for "
                          r"input", re.I)
"""TensorFlow's profiler (input pipeline analysis): `Your program is HIGHLY input-bound because 78.3% of the total
step time sampled is waiting for input`."""
_OPEN_BAR = re.compile(r"(?P<desc>[A-Za-z][^|\r\n:\[]{2,80}?)(?:\s*\(num_proc=\d+\))?:\s*(?P<n>\d+)\s*(?:examples|ex|it|ba|"
                       r"samples|rows)?\s*\[(?P<spent>[\d:]+),\s*(?P<rate>[\d.]+)\s*"
                       r"(?P<unit>examples/s|ex/s|it/s|ba/s|s/it|s/ex|s/examples?|samples/s|rows/s)\]")
"""A dataset step's bar with no total (`Generating train split: 1843200 examples [41:07, 747.08 examples/s]`)."""
_OPEN_WORDS = re.compile(r"generat\w* \w+ split|\bmap\b|token|filter|preprocess|pack|convert|format|dataset", re.I)
OPEN_SLOW_S = 600


def open_bar(line: str) -> dict[str, object] | None:
    """A dataset preparation bar without a total that has run for more than 10 minutes already."""
    found = _OPEN_BAR.search(line)
    if found is None or not _OPEN_WORDS.search(found.group("desc")):
        return None
    spent = 0
    for part in found.group("spent").split(":"):
        spent = spent * 60 + int(part or 0)
    if spent < OPEN_SLOW_S:
        return None
    return {"text": "preprocessing", "line": line.strip()[:300], "desc": found.group("desc").strip(),
            "rate": float(found.group("rate")), "unit": found.group("unit"), "minutes": spent / 60}


# -- the watch ---------------------------------------------------------------------------------------------


@dataclass
class StarveText:
    """The text's signs of a GPU waiting for data, as at most one finding."""

    util: UtilSamples = field(default_factory=UtilSamples)
    profile: ProfileTable = field(default_factory=ProfileTable)
    _after_iteration: bool = False  # the last non-empty line logged an iteration
    _util_done: bool = False

    def line(self, line: str, step: int) -> list[Finding]:
        found: list[Finding] = []
        if not line.strip():
            return found
        if self.util.line(line):
            verdict = self.util.verdict() if not self._util_done else None
            if verdict is not None:
                self._util_done = True
                found.append(Finding("data_starved", step, verdict))
        elif _PROFILE_WORDS.search(line):
            profiled = self.profile.line(line)
            if profiled is not None:
                found.append(Finding("data_starved", step, profiled))
        if "input-bound" in line:
            bound = _INPUT_BOUND.search(line)
            if bound and float(bound.group(1)) >= PROFILE_SHARE:
                found.append(Finding("data_starved", step, {"text": "profile", "share": float(bound.group(1)),
                                                            "line": line.strip()[:300]}))
        if "/s]" in line and "<" not in line:
            opened = open_bar(line)
            if opened is not None:
                found.append(Finding("data_starved", step, opened))
        said = said_starved(line, self._after_iteration) if len(line) < 2000 else None
        if said is not None:
            found.append(Finding("data_starved", step, dict(said, text="said")))
        self._after_iteration = bool(_ITERATION.search(line))
        return found


# -- the advice --------------------------------------------------------------------------------------------

_SAID_TITLE = {
    "util": "the GPU's utilisation is low or swings between busy and idle",
    "loader": "data loading is the slow part",
    "storage": "the data is read from slow storage",
    "delay": "the run pauses between batches while each step itself is quick",
    "cpu_busy": "the CPU is saturated while the GPU idles",
}


def starve_text_advice(f: Finding, r: Recipe | None) -> Advice:
    """The GPU waits for the next batch: more loader workers, cheaper batches, faster storage."""
    facts = f.facts
    key = "dataloader_num_workers" if r is not None else \
        "dataloader_num_workers (TrainingArguments) or num_workers (DataLoader)"
    if facts["text"] == "util_samples":
        what = (f"the GPU is {facts['mean']:.0f}% busy on average over {facts['n']} readings "
                f"({facts['low']}-{facts['high']}%, {facts['dips']} at or under {DIP}%)")
        evidence = [facts["line"]]
    elif facts["text"] == "profile":
        what = f"fetching the next batch takes {facts['share']:g}% of the profiled time"
        evidence = [facts["line"]]
    else:
        what = "as the text says, " + _SAID_TITLE[str(facts["said"])]
        evidence = [facts["quote"]]
    evidence += ["a GPU that waits between steps is fed too slowly: the loader, not the model, sets the pace",
                 "make each batch cheap: tokenise/decode once ahead of training (save_to_disk), keep the data on "
                 "fast local disk, pin_memory" + (", and raise the workers" if facts.get("said") != "cpu_busy"
                                                   else "; with every CPU busy more workers will not help")]
    change: dict[str, object] = {}
    if r is not None and r.training.dataloader_num_workers < 16 and facts.get("said") != "cpu_busy":
        now = r.training.dataloader_num_workers
        change = {"training.dataloader_num_workers": 4 if now == 0 else min(16, 2 * now)}
    title = f"The GPU waits for data ({what}): raise {key}" if facts.get("said") != "cpu_busy" else \
        f"The GPU waits for data ({what}): make batches cheaper to prepare (pre-tokenise, pre-decode)"
    return Advice("data_starved", INFO, title, evidence, change, f.step)
