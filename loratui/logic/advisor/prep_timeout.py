"""A distributed run that dies at its timeout while one rank still prepares the data, told in words: the
preprocessing (tokenising, `prepping the dataset`, 分词), the ranks (rank 0, multi-GPU, DDP, 多卡, ddp_timeout), and
the failure at the timeout's mark (`takes longer than 30 minutes, an exception is thrown`, `到30分钟的时候总会报错`).
The text's last error is the timeout, so the finding is nccl_timeout, with the preprocessing as its cause; a long
tokenisation with no failure said stays data starvation. With no preparation said, a timeout at the default's 30
minutes in a multi-GPU run is still the collective's, its cause left open. Pure: lines in, at most one finding's facts out."""

from __future__ import annotations

import re
from dataclasses import dataclass

from loratui.logic.advisor.gpu_count_words import SEVERAL_GPUS
from loratui.logic.advisor.prep_words import PREP, WORK_HINTS, cut_bar
from loratui.logic.durations import clock_seconds
from loratui.logic.fmt import quoted

_RANKS = re.compile(r"\brank ?\d|\branks?\b|\bmulti-?(?:GPU|node|card)s?\b|\bDDP\b|\bdistributed\b|\btorchrun\b|"
                    r"\bddp_timeout\b|init_process_group|process.group|\bbarrier\b|\bNCCL\b|\bdeepspeed\b|"
                    r"\bmany GPUs|多机|分布式|" + SEVERAL_GPUS.pattern, re.I)
_HALF_HOUR = r"(?:(?:30|thirty)[\s-]*min(?:ute)?s?\b|1800\s*(?:s|sec\w*)\b|half an hour\b)"
_MARK = re.compile(r"\b(?:after|at|when|once|(?:longer|more) than|over|beyond|exceed\w*|past|reach\w*|hits?)\s+"
                   r"(?:the\s+)?(?:~|about\s+|around\s+)?" + _HALF_HOUR + r"|\b(?:30|thirty)[\s-]*minutes? mark\b|"
                   r"\b(?:timed out|times out|time out(?!\s*[=:(]))|"
                   r"(?:到|超过|过了?)\s*(?:30\s*分钟|半小时)|(?:30\s*分钟|半小时)(?:后|以后|之后|的时候|左右)|"
                   r"超时(?!\s*(?:时间|设置|参数|[=:：]))",
                   re.I)
"""The run reaching the distributed timeout's mark (its default 30 minutes: `takes longer than 30 minutes`, `到30分钟的
时候`), or a timeout that happened (`times out`, `超时`); not a setting (`ddp_timeout=1800`, `超时时间设置`)."""
_FAILS = re.compile(r"\b(?:errors?|exceptions?|thrown|fail\w*|crash\w*|die[sd]?|killed|abort\w*|times? ?out|"
                    r"timed ?out)\b|报错|错误|失败|挂掉|超时|中断", re.I)
_QUESTION_ONLY = re.compile(r"^\s*(?:how|what|is|can|could|should)\b[^.!?]*\?\s*$", re.I)
"""A question and nothing more (`how do I raise the ddp timeout?`): no failure said."""
_THIRTY = re.compile(r"\b(?:30|thirty)\s*min|\b1800\b|half an hour|30\s*分钟|半小时", re.I)
"""The failure line names the default timeout's 30 minutes: the timeout that ran out is then known (1800 s)."""
_TIMEOUT = re.compile(r"(?<![A-Za-z])time(?:d|s)?[\s_-]?out\b|超时", re.I)
"""A timeout said in the failure line: a multi-GPU run's timeout at the default's 30 minutes is a collective's
(`单机多卡全量微调，使用deepspeed的stage3，每次到30分钟报错timeout`, LlamaFactory#662), whatever kept a rank away."""

_ELAPSED = re.compile(r"\[((?:\d{1,3}:)?\d{1,2}:\d\d)\s*<")
"""A progress bar's elapsed time (tqdm's `[32:13<53:59, 16.42ba/s]`, `[1:01:03<00:00`)."""
_FAILED_AFTER = re.compile(r"Traceback \(most recent call last\)|\b[A-Z]\w*(?:Error|Exception)\b")
_WAITS = re.compile(r"\bbarrier\(|, in (?:monitored_)?barrier\b|\bmain_process_first\b")
"""A traceback's frame waiting for the other ranks (`dist.barrier()`, the Trainer's `main_process_first`): the rank
that printed it waited on another's work."""
HALF_HOUR_S = 1800
"""The default timeout of torch.distributed's collectives (and of the Trainer's ddp_timeout)."""

# Words the regexes' matches hold, tested first (cheap) because this reads every line of a log.
_RANK_WORDS = ("rank", "multi", "ddp", "distributed", "torchrun", "process", "barrier", "nccl", "deepspeed", "gpu",
               "zero", "fsdp", "卡", "多机", "分布式")
_MARK_WORDS = ("30 min", "30min", "30-min", "thirty", "1800", "half an hour", "timeout", "time out", "timed out",
               "times out", "minute mark", "超时", "半小时", "30分", "30 分")


@dataclass
class PrepTimeout:
    """The three parts, each from the first line that says it; done once they all stand."""

    prep: str = ""  # the line that says the data is being prepared
    ranks: bool = False
    failed: str = ""  # the line that says the run failed at the timeout's mark
    done: bool = False
    long_bar: str = ""  # the last bar drawn, when it had run past the timeout's half hour
    ran_s: int = 0  # that bar's elapsed seconds
    failed_after: str = ""  # the long bar a failure followed, until a frame shows a rank waiting (a bar of no name)

    def line(self, line: str) -> dict[str, object] | None:
        if self.done or len(line) > 2000:
            return None
        if "<" in line and "[" in line and self._bar(line) and self.failed:
            return self._found()
        if line.lstrip()[:1] == "{" or "it/s" in line or "s/it" in line:
            return None  # a printed log dict or a progress bar says no more; this runs on every line of a log
        low = line.lower()
        if self.long_bar and not self.failed and ("Error" in line or "Exception" in line or "Traceback" in line) and \
                _FAILED_AFTER.search(line):
            self._failed_after()  # the failure printed next after the bar
        if self.failed_after and not self.failed and ("arrier" in line or "main_process_first" in line) and \
                _WAITS.search(line):
            self.failed = self.failed_after
        if not self.prep and any(w in low for w in WORK_HINTS) and PREP.search(line):
            self.prep = quoted(line)
        self.ranks = self.ranks or any(w in low for w in _RANK_WORDS) and _RANKS.search(line) is not None
        marked = any(w in low for w in _MARK_WORDS) and not _QUESTION_ONLY.match(line)
        mark = _MARK.search(line) if marked and not self.failed else None
        if mark and _FAILS.search(line[:mark.start()] + line[mark.end():]):
            self.failed = quoted(line)
        return self._found()

    def _found(self) -> dict[str, object] | None:
        if not (self.ranks and self.failed):
            return None
        if not self.prep and not (_THIRTY.search(self.failed) and _TIMEOUT.search(self.failed)):
            return None  # with no preparation said, only a timeout at the default's 30 minutes is the collective's
        self.done = True
        thirty = _THIRTY.search(self.failed) is not None or self.failed == self.long_bar
        return {"line": self.failed, "op": "", "timeout_ms": 1800000 if thirty else 0,
                "ran_ms": self.ran_s * 1000 if self.failed == self.long_bar else 0, "timed_out": True, "prep": self.prep}

    def _bar(self, line: str) -> bool:
        """A progress bar: the preparation's bar names the data being prepared; one that had run past the half hour
        and the failure printed right after it (on its line when the traceback cut the bar's redraw) is a failure at
        the timeout's mark, the ranks that waited on it being what timed out. True when the line was a bar."""
        elapsed = _ELAPSED.search(line)
        if elapsed is None:
            return False
        ran = clock_seconds(elapsed.group(1))
        self.long_bar, self.ran_s = (quoted(line), ran) if ran >= HALF_HOUR_S else ("", 0)
        self.failed_after = ""
        if self.long_bar and not self.failed and _FAILED_AFTER.search(line, elapsed.end()):
            self._failed_after()
        return True

    def _failed_after(self) -> None:
        """A failure printed right after a bar past the half hour: the preparation's bar says it at once; a bar that
        names nothing needs the traceback's frames to show a rank waiting on another."""
        bar = self.long_bar
        elapsed = _ELAPSED.search(bar)
        if cut_bar(bar) or PREP.search(bar, 0, elapsed.start() if elapsed else len(bar)):
            self.prep = self.prep or bar
            self.failed = bar
        else:
            self.failed_after = bar
