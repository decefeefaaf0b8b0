"""The data's preparation named in words, and a progress bar of it, one notion each for every reader that looks for
them: a rank's timeout while the first rank prepares (prep_timeout), the preparation said slow or stuck (starve) or
measured slow (starve_measured), a preprocessing bar that runs long (text). Pure: patterns, the words that gate them,
and a bar's judgement."""

from __future__ import annotations

import re

PREP_NAMED = (r"tokeni[sz]\w*|\bBPE\b|\bpack(?:ing|ed)\b|pre-?process\w*|\.map\(|\bmap\(\)|dataset map|"
              r"(?-i:\bmap)\s+(?:function|call|step|operation|stage)|(?-i:\bmap)\s*(?=[\u4e00-\u9fff])|"
              r"Running tokenizer|Grouping texts|预处理|分词|数据(?:处理|加载|读取|准备)|(?:处理|加载|读取|准备)数据|"
              r"(?:数据|样本)[^，,。；]{0,20}?处理")
"""Preparing the data by name: tokenising, BPE, packing, preprocessing, a dataset's map (`map` in lower case or
called: mAP is a detection metric), the steps datasets and transformers print (`Running tokenizer on dataset`,
`Grouping texts in chunks`), and the Chinese (`数据预处理`, `分词`, `处理数据`). Regex text, to set in a larger pattern
compiled with re.IGNORECASE."""
PREP_WORK = PREP_NAMED + (
    r"|\b(?:prep(?:ping|aring)?|prepar\w*|pre-?process\w*|process\w*|build\w*|load\w*|read\w*|cach\w*)\s+"
    r"(?:the |a |my |our |all |each |every |\d+\S*\s+)?(?:\w+ )?(?:data(?:set)?|samples|examples|records|rows|"
    r"corpus)\b|\bdata ?set (?:prep\w*|pre-?process\w*|tokeni[sz]\w*|load\w*|build\w*)")
"""PREP_NAMED, or work done on the data set itself: preparing, processing, building, loading, reading or caching it
(`loading the dataset` counts, `loading the model` does not)."""
PREP = re.compile(PREP_WORK, re.I)
"""PREP_WORK on its own: the data being prepared."""
NAMED_HINTS = ("token", "bpe", "pack", "process", "map", "grouping", "预处理", "分词", "数据", "样本")
"""Words every PREP_NAMED match holds, lower case: the cheap test before the pattern, on every line of a log."""
WORK_HINTS = NAMED_HINTS + ("data", "sample", "example", "record", "rows", "corpus")
"""Words every PREP_WORK match holds, lower case."""


# -- a progress bar of the data's preparation -------------------------------------------------------------------

BAR = re.compile(r"(?P<desc>[^|\r\n]{0,120}?):?\s*\d{1,3}%\s*(?:\|[^|\n]{0,200}\|)?\s*(?P<n>\d+)/(?P<total>\d+)\s*"
                 r"\[(?P<spent>[\d:]+)<(?P<left>[\d:]+),\s*(?P<rate>[\d.]+)\s*"
                 r"(?P<unit>examples/s|ex/s|ba/s|it/s|s/examples?|s/ex|s/ba|s/it)")
"""tqdm's bar of a dataset step; a crawling one prints its rate inverted (`3.21s/ba`); a notebook's widget copied as
text has no bar drawn (`Map: 100% 1000000/1000000 [1:02:10<00:00, 268.10 examples/s]`)."""
_DESC = re.compile(r"(?P<desc>[^|\r\n]{0,120}?):?\s*\d{1,3}%")
"""A bar's description when the rest of the bar is cut (a traceback printed over its redraw)."""
BAR_WORDS = re.compile(r"\bmap\b|token|filter|preprocess|convert|pack|chat template|format|dataset|example|scann|"
                       r"cach(?:e|ing)|index|extract|decod|\b(?:images?|labels?|samples|records|shards|features?|"
                       r"audio|videos?|clips|frames)\b", re.I)
"""A bar that prepares the training data: tokenising, packing, and the image and video pipelines' own
(YOLO's `Scanning ... images and labels`, `Caching images`, `Extracting features`, Megatron's index)."""
NOT_PREP_BAR = re.compile(r"checkpoint|\bmodel|weight|download|upload|\bsav(?:e|ing)|eval|valid|predict|\btest|infer|"
                          r"resolv|fetch|push|export", re.I)
"""Bars of other waits: the model's shards loading, a download, a save, an evaluation (unless the bar tokenises:
`Tokenizing eval dataset`)."""
TOKENISING = re.compile(r"token|\bmap\b|pack|chat template|format|example|dataset", re.I)
_STEP_UNITS = ("it/s", "s/it", "")
"""A bar's rate in steps (or none read): the description alone must say it prepares the data; datasets' own units
(examples, batches a second) say it."""


def prep_bar(desc: str, unit: str = "") -> bool:
    """A bar of the data's preparation, by its description and its rate's unit (`` when the bar was cut)."""
    if TOKENISING.search(desc):
        return True
    if NOT_PREP_BAR.search(desc):
        return False
    return unit not in _STEP_UNITS or BAR_WORDS.search(desc) is not None


def cut_bar(line: str) -> bool:
    """A bar of the data's preparation, from a line that may have been cut after its description."""
    whole = BAR.search(line)
    if whole is not None:
        return prep_bar(whole.group("desc"), whole.group("unit"))
    desc = _DESC.match(line)
    return desc is not None and prep_bar(desc.group("desc"))
