"""The data's preparation MEASURED, in a person's words or a program's line: a number with its unit attached to the
work done on the data, the way a maintainer reads a report of a slow start or a starved loop. Three measures:

- the whole dataset's preparation timed at minutes or more (`It takes about 10 minutes for tokenization and packing
  every time`, `Loaded tokenizer in 569.97 seconds`, `130k数据需要20min处理`, `preprocessing took 2 h`);
- the preparation's rate falling several times over, or to single digits (`Running tokenizer on dataset 的速度从几百
  samples/s 下降到个位数`, `map slowed from 2000 examples/s to 40 examples/s`);
- the wait for each batch timed at a second or more per iteration (`it takes about 3.2s between iterations to get
  data`, `every step spends 2 s fetching the next batch`, `每个iter取数据要3秒`).

One clause holds the work and its number, so a model's load, a save or an evaluation timed beside it are not read.
Pure: a line in, facts or None."""

from __future__ import annotations

import re

from loratui.logic import durations
from loratui.logic.advisor.prep_words import PREP
from loratui.logic.clauses import clauses, denial, sentences
from loratui.logic.fmt import quoted

_NOT_DATA = re.compile(r"\b(?:model|checkpoint\w*|weights?|shards?|safetensors|download\w*|upload\w*|sav(?:e|es|ed|ing)|"
                       r"eval\w*|validat\w*|inference|generat\w*|predict\w*|compil\w*|install\w*|pip|wheel|build(?:ing)? "
                       r"(?:the )?(?:wheel|image|docker|extension))\b|模型|权重|保存|推理|评估|下载", re.I)
"""Another job timed in the clause: the model's load, a download, a save, an evaluation, generation, a build."""
_DENIED = denial(r"\b(?:only|just|fast|quick\w*|fine)\b|只(?:要|需)|很快")
"""`does not take 10 minutes`, `only takes 5 minutes`, `只需要20分钟`, `is fast`: no complaint."""

_DURATION = durations.pattern("s min h d", counts=True)
PREP_S = 300
"""Preparing a dataset for five minutes or more, every run, before one step: a person reports it because it is."""


def _longest(clause: str) -> float:
    return max(durations.all_seconds(clause, _DURATION), default=0.0)


# -- the rate of the preparation falling ---------------------------------------------------------------------

_RATE_WORDS = re.compile(r"速度|speed|rate|throughput|/s\b|/sec\b|per second|it/s", re.I)
_FELL = re.compile(r"(?:下降|降低|降|掉|跌|减|变慢)|\b(?:drop\w*|fall\w*|fell|slow\w*|decreas\w*|declin\w*|degrad\w*|"
                   r"down)\b", re.I)
_TARGET = re.compile(r"(?:\bto\b|到|至|为)(?=\s*(?:about |around |~|only |just )?" + "(?:" + r"\d|几|个位|上|数|hundreds|thousands|"
                     r"dozens|tens|single|a few" + r"))", re.I)
_AMOUNT = (r"(?:\d+(?:\.\d+)?\s*[kK]?|几十|几百|几千|上百|上千|数百|数千|hundreds|thousands|dozens|tens|个位数|single[- ]digits?|"
           r"a few|几)")
_FROM = re.compile(r"(?:from|从|starts? (?:at|with|out at)|started (?:at|with|out at)|at first|initially|一开始(?:是|有)?|"
                   r"开始(?:是|时|有))\s*(?:about |around |~)?(?P<a>" + _AMOUNT + r")", re.I)
_TO = re.compile(r"\s*(?:about |around |~|only |just )?(?P<b>" + _AMOUNT + r")", re.I)
_WORD_AMOUNT = {"几十": 30, "tens": 30, "dozens": 30, "几百": 300, "上百": 100, "数百": 300, "hundreds": 300,
                "几千": 3000, "上千": 1000, "数千": 3000, "thousands": 3000, "个位数": 5, "single digit": 5,
                "single digits": 5, "single-digit": 5, "single-digits": 5, "a few": 3, "几": 5}
_TIME_PER = re.compile(r"\b(?:s|secs?|seconds?|ms)\s*/\s*(?:it|iter\w*|step|batch)\b|\b(?:s|secs?|seconds?) per\b|秒/", re.I)
FELL_BY = 2.5
SINGLE = 10


def _amount(text: str) -> float:
    text = text.strip().lower()
    if text in _WORD_AMOUNT:
        return _WORD_AMOUNT[text]
    number = re.match(r"(\d+(?:\.\d+)?)\s*(k?)", text)
    return float(number.group(1)) * (1000 if number.group(2) else 1) if number else 0.0


def _rate_fell(clause: str) -> bool:
    """The clause's rate fell 2.5 times or more (`from 2000 to 40`), or to single digits."""
    if not _RATE_WORDS.search(clause) or _TIME_PER.search(clause):
        return False  # a time per step falling (`s/it dropped from 8 to 1`) is a speed-up
    for target in _TARGET.finditer(clause):
        to = _TO.match(clause, target.end())
        if to is None or not _FELL.search(clause[max(0, target.start() - 60):target.start()]):
            continue
        fell = target
        after = _amount(to.group("b"))
        source = None
        for source in _FROM.finditer(clause[:fell.start()]):
            pass
        before = _amount(source.group("a")) if source is not None else None
        if before is not None and after > 0 and before >= FELL_BY * after or before is None and 0 < after < SINGLE:
            return True
    return False


# -- the wait for each batch ---------------------------------------------------------------------------------

_FETCH = re.compile(r"\b(?:get|load|fetch|read|prepar|wait|collat)\w*\b[^.,;:]{0,20}?\b(?:the\s+|a\s+|each\s+|every\s+)?"
                    r"(?:next\s+)?(?:data|batch(?:es)?|samples?|inputs?|images?)\b|\bdata ?load(?:ing|ers?)\b|"
                    r"取数据|读数据|加载数据|数据加载|读取数据", re.I)
_PER_STEP = re.compile(r"\bbetween (?:two |consecutive |the )?(?:iterations|iters|steps|batches)\b|"
                       r"\b(?:per|each|every|a) (?:training )?(?:iteration|iter|step|batch)\b|"
                       r"每(?:个|一)?\s*(?:iter|step|batch|迭代|步)", re.I)
_STEP_DURATION = durations.pattern("ms s")
WAIT_S = 1.0
"""A second or more each batch waits for its data: a step that long on the GPU alone is rare for a fine-tune."""


def _waits(clause: str) -> bool:
    if not (_FETCH.search(clause) and _PER_STEP.search(clause)):
        return False
    seconds = durations.all_seconds(clause, _STEP_DURATION)
    return bool(seconds) and max(seconds) >= WAIT_S


_COUNTED = re.compile(r"\d|[几半个一二两三四五六七八九十]|\b(?:single|hundreds|thousands|dozens|tens|few|several|half|an?|one|two|"
                      r"three|four|five|six|seven|eight|nine|ten|twelve|twenty)\b",
                      re.I)
"""A number in the clause, in figures or words: the cheap test before the measures."""


_FEED = re.compile(r"\bstream\w*|\bdata ?loaders?\b|\bdata ?loading\b|\bnum_workers\b|\bworkers?\b|\bNFS\b|"
                   r"\bnetwork (?:drive|disk|storage|file ?system)|\bS3\b|\bGCS\b|\bGoogle Drive\b|\bHDD\b|\bwebdataset\b|"
                   r"\bIterableDataset\b|\blazy\w*|数据加载|读取数据|流式", re.I)
"""The data's source or loader named beside a falling speed: the speed fell with the feed (`it/s drops from 4 to
0.5 after I switched to streaming=True`)."""
_LONGER_THAN_TRAINING = re.compile(
    r"\b(?:takes?|took|taking|is|was|runs?)\s+(?:much\s+|way\s+|far\s+|even\s+|\d+x\s+)?(?:longer|slower|more time)\s+than\s+"
    r"(?:the\s+)?(?:actual\s+|whole\s+|real\s+)?(?:training|train(?:ing)? (?:itself|run|loop)|fine-?tuning|the model)\b|"
    r"比(?:实际)?(?:训练|微调)(?:本身)?(?:还|都)?(?:慢|久|长)", re.I)
"""The preparation said to take longer than training itself: the GPU waits more than it works."""


_KNOB = re.compile(r"\b(?:dataloader_)?num_workers\b|\bpin_memory\b|\bprefetch_factor\b|\bpersistent_workers\b|"
                   r"\b\d+\s+(?:loader |dataloader )?workers\b", re.I)
"""The loader's knobs: the run's time compared across them says whether the loader sets the pace."""
_RUN_TIME = durations.pattern("s m min h", compound=True, per=True)
"""A run's time, a compound one as one (`2 hours and 10 minutes`, `1h 30m`), a time per epoch too (`45 min/epoch`)."""
_COMPARED = re.compile(r"\b(?:faster|slower|speed-?up|instead|versus|vs\.?|compared|whereas)\b|->|→|\d\s*[x×]\b", re.I)
_SLOW_BLAMED = re.compile(
    r"(?:慢|卡|slow)[^。！？\n]{0,30}?(?:是|因为|由于|原因是|在于|出在|卡在)\s*(?:数据加载|数据读取|读取数据|加载数据|取数据|"
    r"data ?loader|dataloader|数据预处理|预处理|IO|I/O|磁盘|硬盘)|"
    r"\b(?:turn(?:s|ed)? out (?:to be|it was)|the culprit (?:is|was)|(?:is|was) caused by)\s+(?:the\s+)?(?:data ?load\w*|"
    r"dataloader|data pipeline|input pipeline|I/?O|disk|preprocessing|tokeni[sz]ation)\b", re.I)
"""A slow run blamed on the loader in one sentence (`训练速度很慢，发现是数据加载的问题`, `it turned out to be the
dataloader`)."""


def _knob_compared(sentence: str) -> bool:
    """Two run times 2.5x or more apart in a sentence that names the loader's knobs: the run's pace follows the
    loader (`with num_workers=0 training takes 10 hours, with num_workers=8 it takes 2 hours`)."""
    knobs = _KNOB.findall(sentence)
    if not knobs or len(knobs) < 2 and not _COMPARED.search(sentence) or _NOT_DATA.search(sentence):
        return False  # the loader's settings compared: two of them, or one and a comparison
    times = [t for t in durations.all_seconds(sentence, _RUN_TIME) if t > 0]
    return len(times) >= 2 and max(times) >= FELL_BY * min(times)


def measured(line: str) -> dict[str, object] | None:
    """The line's data preparation measured as slow: facts (`said`: preprocessing or delay, `quote`), else None."""
    if len(line) > 1000:
        return None
    for sentence in sentences(line):
        if (_knob_compared(sentence) or _SLOW_BLAMED.search(sentence)) and \
                not re.search(r"\b(?:not|never|isn't|wasn't)\b|n't\b|不是|并非", sentence, re.I):
            return {"said": "loader", "quote": quoted(line)}
    for clause in clauses(line):
        if PREP.search(clause) and _LONGER_THAN_TRAINING.search(clause) and not _DENIED.search(clause):
            return {"said": "preprocessing", "quote": quoted(line)}
        if not _COUNTED.search(clause) or _NOT_DATA.search(clause) or _DENIED.search(clause):
            continue
        if PREP.search(clause) and (_longest(clause) >= PREP_S or _rate_fell(clause)):
            return {"said": "preprocessing", "quote": quoted(line)}
        if _FEED.search(clause) and _rate_fell(clause):
            return {"said": "slowdown", "quote": quoted(line)}
        if _waits(clause):
            return {"said": "delay", "quote": quoted(line)}
    return None
