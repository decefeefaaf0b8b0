"""Data starvation in what a program, a profiler or a stack dump printed: the share of the profiled time spent
fetching batches, a loader's own timer, a timing table, a training bar that slows and stays slow, Megatron's
batch-generator timer, tf.data's wait shares, a dataset preparation bar open for long, a stack caught waiting in the
DataLoader. Each reader sees one line at a time and keeps bounded state. Pure: lines in, facts out."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from loratui.logic.durations import clock_seconds
from loratui.logic.fmt import quoted
from loratui.logic.text_reader.progress import find_bar
from loratui.logic.word_gate import WordGate

# -- profiler tables --------------------------------------------------------------------------------------

_FETCH = re.compile(r"DataLoader\w*\.__next__|DataLoaderIter\w*\.__next__|_next_data|enumerate\(DataLoader\)|"
                    r"dataloader_next|get_train_batch|\bcollate\w*|_MultiProcessingDataLoaderIter|fetch\b|"
                    r"data_?loader\w*\.py:\d+\((?:__next__|__iter__)\)|\b__getitem__\b", re.I)
"""A profiler row that fetches the next batch: PyTorch's `enumerate(DataLoader)#_SingleProcessDataLoaderIter.
__next__`, Lightning's `[_TrainingEpochLoop].train_dataloader_next`, a collate function."""
_PERCENT = re.compile(r"(?<![\w.])(\d{1,3}(?:\.\d+)?)\s*%")
PROFILE_WORDS = WordGate("Percentage", "next", "collate", "fetch", "DataLoader", "getitem", "function calls", "% Time",
                         "loader")
"""The cheap test before a profiler row is read (it runs on every line; as a pattern it cost 5-10 us a line)."""
_CPROFILE_TOTAL = re.compile(r"function calls(?: \(\d+ primitive calls\))? in (\d+(?:\.\d+)?) seconds")
_CPROFILE_ROW = re.compile(r"\s*\d+(?:/\d+)?\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s+[\d.]+\s+\S")
"""cProfile's row: ncalls tottime percall cumtime percall filename:lineno(function); the cumulative time is the
batch fetch's whole cost, against the run's total in the header."""
PROFILE_SHARE = 25.0
"""Fetching batches a quarter of the profiled time or more."""


_LINE_ROW = re.compile(r"^\s*\d+\s+\d+\s+[\d.]+\s+[\d.]+\s+(\d{1,3}(?:\.\d+)?)\s+(.*)$")
_LOOP_OVER_LOADER = re.compile(r"\bfor\b.+\bin\b.*(?:loader|data)\w*|next\(\s*\w*(?:loader|iter|data)\w*", re.I)
"""line_profiler's row of the training loop's `for batch in loader:` (its time is the wait for the next batch)."""


def _line_profile_row(line: str) -> dict[str, object] | None:
    row = _LINE_ROW.match(line)
    if row is None or not _LOOP_OVER_LOADER.search(row.group(2)) or float(row.group(1)) < PROFILE_SHARE:
        return None
    return {"text": "profile", "share": float(row.group(1)), "line": quoted(line)}


@dataclass
class ProfileTable:
    """A profiler's table: the share of time the data-fetching rows take."""

    _share_col: int | None = None  # the `Percentage` column of Lightning's simple profiler
    _total_s: float = 0.0  # cProfile's whole run (`48213921 function calls ... in 412.310 seconds`)
    _line_profile: bool = False  # line_profiler's table (`Line #  Hits  Time  Per Hit  % Time  Line Contents`)

    def line(self, line: str) -> dict[str, object] | None:
        if "% Time" in line and "Line Contents" in line:
            self._line_profile = True
            return None
        if self._line_profile:
            return _line_profile_row(line)
        calls = _CPROFILE_TOTAL.search(line)
        if calls:
            self._total_s = float(calls.group(1))
            return None
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
        cumulative = _CPROFILE_ROW.match(line) if not shares and self._total_s > 0 else None
        if cumulative:
            shares = [round(100 * float(cumulative.group(1)) / self._total_s, 1)]
        share = max((s for s in shares if s <= 100), default=0.0)
        if share < PROFILE_SHARE:
            return None
        return {"text": "profile", "share": share, "line": quoted(line)}


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
    spent = clock_seconds(found.group("spent"))
    if spent < OPEN_SLOW_S:
        return None
    return {"text": "preprocessing", "line": quoted(line), "desc": found.group("desc").strip(),
            "rate": float(found.group("rate")), "unit": found.group("unit"), "minutes": spent / 60}


_LOADER_TIMER = re.compile(r"\b(\w*(?:load|data|fetch)\w*?time|data[_ ]?time|load[_ ]?time|Loaded:)\s*[:=]?\s*(\d+(?:\.\d+)?)",
                           re.I)
"""A loader's time per step (`LoaderTime:120.21`, darknet's `Loaded: 6.516221 seconds`)."""
_OTHER_TIMER = re.compile(r"\b(?!\w*(?:load|data|fetch))\w*time\b\s*[:=]?\s*\d", re.I)
LOADER_ALONE_S = 5.0
"""A loader timer printed with no step timer beside it (`Step:5 [...] LoaderTime:120.21`): 5 s or more per step on
average over 3 lines is a wait no model step explains."""


@dataclass
class LoaderTimer:
    """Loader times printed without a step time (the step timer's lines are judged against it in text.py)."""

    total: float = 0.0
    lines: int = 0

    def line(self, line: str) -> dict[str, object] | None:
        found = _LOADER_TIMER.search(line)
        if found is None or _OTHER_TIMER.search(line):
            return None
        self.total += float(found.group(2))
        self.lines += 1
        mean = self.total / self.lines
        if self.lines < 3 or mean < LOADER_ALONE_S:
            return None
        return {"text": "loader_time", "mean": mean, "lines": self.lines, "line": quoted(line)}


_TIMING_ROW = re.compile(r"^\s*\|?\s*(?P<name>[A-Za-z][^|]{1,60}?)\s*\|\s*(?P<value>\d+(?:\.\d+)?)\s*(?:s|sec|ms)?\s*\|?\s*$")
_DATA_ROW = re.compile(r"\b(?:load\w*|data\w*|fetch\w*|read\w*|augment\w*|collate\w*|batch loading)\b", re.I)
_TOTAL_ROW = re.compile(r"\b(?:total|iteration|whole step|per step)\b", re.I)


@dataclass
class TimingTable:
    """A two-column table of where a step's time goes (`Load batch (n=24)|0.744230`, `Training iteration
    total|0.912715`): the data rows' share of the total row (else of all rows)."""

    rows: list[tuple[str, float]] = field(default_factory=list)
    done: bool = False

    def line(self, line: str) -> dict[str, object] | None:
        row = _TIMING_ROW.match(line)
        if row is None or self.done or len(self.rows) >= 64:
            return None
        self.rows.append((row.group("name"), float(row.group("value"))))
        data = sum(v for n, v in self.rows if _DATA_ROW.search(n) and not _TOTAL_ROW.search(n))
        totals = [v for n, v in self.rows if _TOTAL_ROW.search(n)]
        total = max(totals) if totals else sum(v for _, v in self.rows)
        if len(self.rows) < 3 or not totals or total <= 0 or data > total or data < PROFILE_SHARE / 100 * total:
            return None
        self.done = True
        quoted = " / ".join(f"{n}: {v:g}" for n, v in self.rows[:6])
        return {"text": "profile", "share": round(100 * data / total, 1), "line": quoted[:300]}


RATE_READINGS = 8
RATE_FEW = 5
RATE_SETTLE = 10
RATE_SLOWER = 2.5
"""A training bar slowed for good: the fastest of its last 3 readings 2.5 times slower than the median of its first
half, 8 readings or more, none of the last 3 within 10 redraws after an evaluation or another bar (tqdm smooths the
rate, so a pause for evaluation shows as a slow reading for a few redraws after it); 5 readings are enough where the
text shows no evaluation, save or other bar at all (a few bar lines pasted to show the slowdown)."""


@dataclass
class RateWatch:
    """The training loop's bar (its total) and the seconds per step it showed, to see a lasting slowdown."""

    total: int = 0
    rates: list[float] = field(default_factory=list)
    since_break: int = 0  # readings since the last evaluation, save or other bar
    broke: bool = False  # an evaluation, save or other bar was seen
    done: bool = False

    def line(self, line: str) -> dict[str, object] | None:
        bar = find_bar(line)
        if bar is None:
            if _BREAK.search(line):
                self.since_break, self.broke = 0, True
            return None
        if not bar.maybe_training or bar.total != self.total and self.rates:
            self.since_break, self.broke = 0, True
            if bar.maybe_training and bar.total > self.total:  # the training loop is the longest bar
                self.total, self.rates = bar.total, []
            return None
        self.total = bar.total
        if bar.seconds_per_it is None or self.done or len(self.rates) >= 4096:
            return None
        self.rates.append(bar.seconds_per_it)
        self.since_break += 1
        return self._verdict(line)

    def _verdict(self, line: str) -> dict[str, object] | None:
        n = len(self.rates)
        if (n < RATE_READINGS or self.since_break < RATE_SETTLE + 3) and (self.broke or n < RATE_FEW):
            return None
        early = sorted(self.rates[1:n // 2 + (n < RATE_READINGS)])  # a few: two early readings at least
        before = early[len(early) // 2]
        now = min(self.rates[-3:])
        if before <= 0 or now < RATE_SLOWER * before:
            return None
        self.done = True
        return {"text": "rate_drop", "before": before, "now": now, "n": n, "line": quoted(line)}


_BREAK = re.compile(r"\b(?:eval\w*|validat\w*|sav(?:e|ing)|checkpoint)\b", re.I)


_MEGATRON = re.compile(r"(batch-generator|forward-backward)\s*\.*\s*[:|]?\s*\(?\s*(\d+(?:\.\d+)?)")
"""Megatron's timers (`forward-backward: 4412.28 | ... | batch-generator: 98.17`, or one per line with dots and the
(min, max) across ranks)."""


@dataclass
class MegatronTimers:
    """The batch generator's time against forward-backward's, from Megatron's timer lines."""

    last: dict[str, float] = field(default_factory=dict)

    def line(self, line: str) -> dict[str, object] | None:
        for name, value in _MEGATRON.findall(line):
            self.last[name] = float(value)
        fetch, step = self.last.get("batch-generator"), self.last.get("forward-backward")
        if fetch is None or step is None or step <= 0:
            return None
        self.last = {}
        share = 100 * fetch / (fetch + step)
        if share < PROFILE_SHARE:
            return None
        return {"text": "profile", "share": round(share, 1), "line": quoted(line)}


_WAIT_SHARE = re.compile(r"\b(?:data ?loader|data|loader|input|io|fetch)[ _-]?(?:wait(?:ing)?|stall(?:ed)?|bound)(?:[ _-]?"
                         r"(?:time|share|frac\w*|ratio|pct))?\s*[:=]?\s*(\d+(?:\.\d+)?)\s*%", re.I)
"""A program's printed share of the step spent waiting for input (`dataloader wait 78.2%`, `data_stall: 41%`)."""


@dataclass
class WaitShare:
    """The printed share of time waiting for data, over the lines that print it: two or more lines, a quarter of
    the time or more on average."""

    shares: list[float] = field(default_factory=list)
    done: bool = False

    def line(self, line: str) -> dict[str, object] | None:
        found = _WAIT_SHARE.search(line)
        if found is None or self.done or float(found.group(1)) > 100 or len(self.shares) >= 4096:
            return None
        self.shares.append(float(found.group(1)))
        mean = sum(self.shares) / len(self.shares)
        if len(self.shares) < 2 or mean < PROFILE_SHARE:
            return None
        self.done = True
        return {"text": "profile", "share": round(mean, 1), "line": quoted(line)}


_SHUFFLE_FILL = re.compile(r"Filling up shuffle buffer \(this may take a while\)")
SHUFFLE_LINES = 3
"""TensorFlow's input pipeline printing its shuffle buffer's filling again and again (every 10 s): the pipeline
cannot produce elements as fast as training asks for them."""
_INDEX_BUILT = re.compile(r"elapsed time to build (?:and save )?\S+ mapping \(seconds\):\s*(\d+(?:\.\d+)?)")
"""Megatron's (and NeMo's) dataset index building (`> elapsed time to build and save sample-idx mapping (seconds):
4012.3`): preprocessing before training starts."""


@dataclass
class InputWaits:
    """A pipeline's own reports of its waits: TensorFlow's shuffle buffer filling, Megatron's index building."""

    fills: int = 0
    done: bool = False

    def line(self, line: str) -> dict[str, object] | None:
        if self.done:
            return None
        if _SHUFFLE_FILL.search(line):
            self.fills += 1
            if self.fills >= SHUFFLE_LINES:
                self.done = True
                return {"text": "said", "said": "loader", "quote": f"{quoted(line, 240)} (printed {self.fills} times: "
                                                                    "the input pipeline fills its buffer slowly)"}
            return None
        built = _INDEX_BUILT.search(line)
        if built and float(built.group(1)) >= OPEN_SLOW_S:
            self.done = True
            return {"text": "said", "said": "preprocessing", "quote": quoted(line)}
        return None


# -- a stack caught waiting for data ------------------------------------------------------------------------

_FETCH_FRAME = re.compile(
    r"torch/utils/data/dataloader\.py\W.{0,40}?\b(?:__next__|_next_data|_get_data|_try_get_data)\b|"
    r"\b(?:__next__|_next_data|_get_data|_try_get_data) \([^)]*torch/utils/data/dataloader\.py")
"""The main process inside the DataLoader's fetch (`File ".../torch/utils/data/dataloader.py", line 1132, in
_try_get_data`, py-spy's `_next_data (torch/utils/data/dataloader.py:1328)`): it waits for the next batch. The
workers' own frames (`_utils/worker.py`, `fetch.py`) are not there: a Ctrl-C lands in them whatever the run did."""
_PREP_FRAME = re.compile(r"datasets/arrow_dataset\.py\W.{0,40}?\b(?:map|_map_single|filter)\b|"
                         r"\b(?:map|_map_single|filter) \([^)]*datasets/arrow_dataset\.py")
"""The main process inside a dataset's map or filter (tokenising, packing)."""
_DUMP = re.compile(r"\(most recent call first\)|^\s*Thread (?:0x[0-9a-f]+|\d+) \((?:idle|active|gil)\b|^\s*Process \d+: ",
                   re.I)
"""A stack dump of a live process: faulthandler's `Thread 0x... (most recent call first):`, py-spy dump's
`Thread 12345 (idle): "MainThread"`."""


@dataclass
class StackWait:
    """A stack of the run caught where it waits for data: a traceback a Ctrl-C ended (KeyboardInterrupt), or a
    dump of the live process (py-spy, faulthandler), with the main process in the DataLoader's fetch or a dataset's
    map. Someone stopped or sampled a run that crawled or sat idle, and it was waiting for its data."""

    frame: str = ""  # the fetch or map frame of the stack being read
    mode: str = ""  # "trace" inside a traceback, "dump" inside a stack dump
    done: bool = False

    def line(self, line: str) -> dict[str, object] | None:
        if self.done:
            return None
        if "Traceback (most recent call last)" in line:
            self.mode, self.frame = "trace", ""
        elif _DUMP.search(line):
            self.mode, self.frame = "dump", ""
        elif self.mode and not self.frame and (_FETCH_FRAME.search(line) or _PREP_FRAME.search(line)):
            self.frame = quoted(line)
            return self._found() if self.mode == "dump" else None
        elif self.mode == "trace" and re.match(r"\s*(?:\^C)?KeyboardInterrupt\b", line):
            return self._found() if self.frame else None
        return None

    def _found(self) -> dict[str, object]:
        self.done = True
        stopped = "stopped by hand" if self.mode == "trace" else "sampled"
        where = "preprocessing" if _PREP_FRAME.search(self.frame) else "loader"
        return {"text": "said", "said": "stack_" + where, "quote": f"{self.frame} (the run {stopped} there)"}


def input_bound(line: str) -> dict[str, object] | None:
    """A profiler's input-bound share of the step, at or over PROFILE_SHARE."""
    bound = _INPUT_BOUND.search(line) if "input-bound" in line else None
    if bound is None or float(bound.group(1)) < PROFILE_SHARE:
        return None
    return {"text": "profile", "share": float(bound.group(1)), "line": quoted(line)}
