"""The step's pace that does not follow the model's size or the GPU: a bigger model (more layers, more parameters,
the same inputs) takes more GPU time per step and a faster card less, so when a small and a big model, or a slow and
a fast card, take the same time per step something else sets the pace: the loader. Read from a person's words (`switching from 7B to 13B doesn't change the speed`,
`ResNet-50 and ResNet-101 both run at 0.88 s/iter`, `换成 1.5B 和 7B 速度差不多`) and from a pasted benchmark table
whose rows differ only in the model's size and show the same time (mmpose#23). Pure: lines in, facts out."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from loratui.logic.clauses import sentences
from loratui.logic.fmt import quoted

_SIZED = re.compile(r"(?<![A-Za-z0-9_.])(?:\d+(?:\.\d+)?\s*[BM](?![A-Za-z0-9_])|(?:res(?:net)?|vit|bert|gpt2?|llama|qwen\w*|t5|swin|"
                    r"efficientnet|hrnet)[-_ ]?(?:w)?\d+[a-z]?\b|(?:tiny|small|base|large|xl|xxl|huge)\b)", re.I)
"""A model named with its size: `7B`, `350M`, `ResNet-101`, `hrnet_w48`, `bert-base`, `large`."""
_GPU_MODEL = re.compile(r"(?<![A-Za-z0-9])(?:[AHVLT]\d{2,4}|RTX ?\d{4}(?: ?Ti)?|GTX ?\d{3,4}|MI\d{3}X?|\d{4} ?Ti)(?![A-Za-z0-9])",
                        re.I)
"""A GPU by model: a faster card that gives the same pace says the GPU is not what sets it."""
_BIGGER = re.compile(r"\b(?:bigger|larger|smaller|deeper|shallower|heavier|lighter)\s+(?:model|backbone|network|net)s?\b|"
                     r"(?:更大|更小|大一点|小一点)的?(?:模型|backbone|网络)", re.I)
_SAME_PACE = re.compile(
    r"\b(?:same|identical|similar)\s+(?:training\s+)?(?:speed|s/it|it/s|s/iter|time|pace|throughput|step time)\b|"
    r"\b(?:speed|s/it|it/s|s/iter|step time|time per (?:step|iter\w*|batch)|throughput|pace)\b[^.!?\n]{0,30}?"
    r"\b(?:is|are|stays?|remains?|was|were)\s+(?:exactly\s+|almost\s+|nearly\s+|basically\s+|about\s+)?(?:the same|"
    r"identical|unchanged|similar)\b|"
    r"\b(?:do(?:es)?n'?t|did(?:n'?t| not)|does not|do not)\s+(?:really\s+)?(?:change|affect|slow down|speed up)\s+"
    r"(?:the\s+)?(?:speed|s/it|it/s|step time|throughput|pace|training time)|"
    r"\bjust as (?:slow(?:ly)?|fast)\b|\bboth\s+(?:run|take|train|are|go)\s+(?:at\s+)?(?:about\s+|~)?\d+(?:\.\d+)?\s*"
    r"(?:s/it|it/s|s/iter|s\b|sec)|"
    r"\b(?:speed|s/it|it/s|s/iter|throughput|pace|step time|training time)\b[^.!?\n]{0,40}?\b(?:barely|hardly|"
    r"did(?:n't| not)|does(?:n't| not)|not)\s+(?:\w+\s+)?(?:chang\w*|improv\w*|differ\w*)|"
    r"速度(?:也|都|基本|几乎)*(?:一样|没变|没有变化|差不多|相同|不变)|(?:一样|差不多)的?速度", re.I)
"""The pace said to be the same (`the same s/it`, `the speed is the same`, `doesn't change the speed`, `both run at
0.88 s/iter`, `速度差不多`)."""


def same_pace_said(line: str) -> dict[str, object] | None:
    """Two model sizes (or a bigger model) and the same pace in one sentence."""
    if len(line) > 1000:
        return None
    for sentence in sentences(line):
        sizes = {m.group(0).lower().replace(" ", "") for m in _SIZED.finditer(sentence)}
        cards = {m.group(0).upper().replace(" ", "") for m in _GPU_MODEL.finditer(sentence)}
        if (len(sizes) >= 2 or len(cards) >= 2 or _BIGGER.search(sentence)) and _SAME_PACE.search(sentence):
            return {"said": "loader", "quote": quoted(line)}
    return None


# -- a benchmark table ------------------------------------------------------------------------------------------

_TIME_HEAD = re.compile(r"s/it|s/iter|sec/it|time|it/s|speed", re.I)
SAME = 0.03
"""Two times within 3%: the same pace."""


@dataclass
class PaceTable:
    """A pasted table (`|` cells) whose header names a time per step: rows that differ only in the model's size
    and show the same time."""

    column: int | None = None
    rows: list[tuple[str, str, float]] = field(default_factory=list)  # (model family, other cells, time)
    done: bool = False

    def line(self, line: str) -> dict[str, object] | None:
        if self.done or line.count("|") < 2:
            return None
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if self.column is None:
            heads = [i for i, c in enumerate(cells) if _TIME_HEAD.search(c)]
            self.column = heads[-1] if heads else None
            return None
        if len(cells) <= self.column or not _SIZED.match(cells[0]):
            return None
        try:
            time = float(cells[self.column])
        except ValueError:
            return None
        size = cells[0].lower()
        family = _family(size)
        rest = "|".join(c for i, c in enumerate(cells) if i not in (0, self.column))
        for other_size, other_rest, other_time in self.rows:
            if other_size != size and other_rest == rest and _family(other_size) == family and time > 0 and \
                    abs(other_time - time) <= SAME * time:
                self.done = True
                return {"said": "loader", "quote": f"{other_size} and {size} both take {time:g} ({quoted(line, 200)})"}
        self.rows.append((size, rest, time))
        return None


def _family(name: str) -> str:
    """The model's name without its size (`resnet_#`, `qwen-#b`): rows of one family differ in size alone."""
    return re.sub(r"\d+(?:\.\d+)?", "#", name.lower())
