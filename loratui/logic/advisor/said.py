"""A loss said to rise or explode, in the words of the program or of the person who pasted the log (`"loss
exploded" threw out and the training is stopped`, `the train loss decrease first and then increase`, `出现了loss
爆炸`): the only evidence of divergence in a report that prints no numbers. Pure: a line in, a finding or None."""

from __future__ import annotations

import re

from loratui.logic.advisor.advice import Finding

_SUBJECT = r"(?:(?<![A-Za-z_])(?:train(?:ing)?[ _])?loss(?:es)?(?![A-Za-z])(?!\s*[_ ]?scal)|损失)"
"""The training loss, also inside Chinese text (`出现了loss爆炸`: no word boundary there); not `val_loss`, not fp16's
loss scale/scaler, whose rise is normal."""
_RISE = (r"(?:explo(?:d\w*|sion)|blew up|blow(?:s|ing)? up|diverg\w*|increas\w*|went up|goes up|going up|climb\w*|"
         r"ris(?:es|ing|e)\b|rose\b|jump(?:s|ed|ing)?\b|spik(?:e|es|ed|ing)\b|skyrocket\w*|shot up|shoots up|"
         r"grow(?:s|ing)?\b|grew\b|(?:gets?|getting|got|becomes?|became|keeps? getting)\s+(?:bigger|larger|higher)\b|"
         r"higher and higher|bigger and bigger|larger and larger)")
_SAID = re.compile(
    _SUBJECT + r"(?P<gap>[^.!?\n,;:=]{0,30}?)\b" + _RISE +
    r"|\b(?:explod\w*|increasing|rising|diverging|growing)\s+(?:train(?:ing)?\s+)?loss\b(?!\s*[_ ]?scal)" +
    r"|" + _SUBJECT + r"\s*(?:值|函数)?\s*(?:也|又|会|就|还|突然|一直|不断|开始|逐渐|出现了?|的)*\s*"
    r"(?:爆炸|增大|变大|上升|升高|增加|飙升|暴增|暴涨|发散|上涨|越来越大|越来越高|不降反升|不降反增)",
    re.I)
_HELD = re.compile(r"\b(?:not?|never|without|avoid\w*|prevent\w*|stop(?:s|ped)? (?:the )?|instead of|if|whether|"
                   r"probably|possibly|maybe|may|might|could|would)\b|n't\b|"
                   r"[不没未]|避免|防止", re.I)
"""Words that deny, ward off or only suppose the rise (`the loss does not explode`, `how to avoid the loss
exploding`, fairseq's boilerplate `Your loss is probably exploding` beside its fp16 floor, `if the loss explodes`)."""
_OTHER = re.compile(r"\b(?:learning[ _]rate|lr|accuracy|acc|batch|memory|time|steps?|epochs?|scale|lengths?)\b", re.I)
"""Another quantity between the loss and the verb: `loss decreases while the learning rate increases`."""
_NOT_TRAIN = re.compile(r"(?:val(?:id(?:ation)?)?|eval(?:uation)?|test|dev)[ _]$", re.I)
"""A validation loss rising while training goes on is overfitting, not divergence."""
_CODE = re.compile(r"^\s*(?:def |class |import |from \S+ import|#|//|if |elif |for |while |return |raise |assert |"
                   r"[\w.\[\]'\"]+\s*[-+*/]?=\s)|"
                   r"[=(]\s*\w*loss\w*\s*[,)]")


def rise_said(line: str, step: int) -> Finding | None:
    """The first clause of `line` that says the training loss rises, explodes or diverges, as a finding."""
    if _CODE.search(line):
        return None
    for found in _SAID.finditer(line):
        before = line[max(0, found.start() - 24):found.start()]
        gap = found.group("gap") or ""
        if _NOT_TRAIN.search(before) or _HELD.search(before[-12:] + gap) or _OTHER.search(gap):
            continue
        return Finding("loss_diverging", step, {"kind": "said", "quote": line.strip()[:300], "lr": None})
    return _numbers_rise(line, step)


_QUANTITY = re.compile(r"\b(?:learning[ _]rate|lr|accuracy|acc|batch|memory|size|lengths?|scale|grad\w*|norm|"
                       r"ppl|perplexity|bleu|wer|cer|f1|map|iou|reward\w*|temperature)\b", re.I)
"""Quantities other than the loss that a sentence may give numbers for (epochs and steps only date a loss)."""
_SENTENCE = re.compile(r"(?<=[.!?。！？])(?:\s+|$)|(?<=[。！？])")
_VALUE_WORD = re.compile(
    r"\b(?:was|is|of|at|from|to|became|becomes|become|reached|reaches|hit|loss|below|above|under)\s+"
    r"(?:about\s+|around\s+|~\s*)?"
    r"(\d{1,3}(?:,\d{3})+|\d{1,3}(?: \d{3})+(?![\d.])|\d+(?:\.\d+)?)(?!\.?\d)"
    r"(?!\s*(?:st|nd|rd|th)\b|\s*%|\s*(?:x|times|epochs?|iter\w*|steps?|k|hours?|h|min\w*|s|sec\w*|days?)\b)",
    re.I)
"""A number the loss is said to be (`was about 100`, `dropped to 70`, `became 800,000`, `from 1.2 to 16 000`), or
a bound it kept (`never dipped below 88`); not an ordinal, a percentage, a count of epochs or steps, a time."""
SAID_RISE = 1.2
"""A rise a person reports in numbers: a fifth above the lowest they name. Lower than the printed series' third,
because here the numbers were chosen to show the rise, not sampled with their noise; a step from 2.31 to 2.35 is
still no rise."""


def _numbers_rise(line: str, step: int) -> Finding | None:
    """A sentence about the training loss whose numbers end a third above the lowest before them: `the loss was
    about 100 in the first epoch and dropped to 70 ..., but it suddenly became 800,000`."""
    for sentence in _SENTENCE.split(line):
        subject = re.search(_SUBJECT, sentence, re.I)
        if subject is None or _NOT_TRAIN.search(sentence[max(0, subject.start() - 24):subject.start()]):
            continue
        numbers = []
        for found in _VALUE_WORD.finditer(sentence, subject.start()):
            before = sentence[subject.start():found.start()]
            losses = [m.end() for m in re.finditer(_SUBJECT, before, re.I)]
            others = [m.end() for m in _QUANTITY.finditer(before)]
            if others and others[-1] > losses[-1]:
                continue  # the number is another quantity's (`loss was 1.2 with batch size from 8 to 32`)
            numbers.append(float(found.group(1).replace(",", "").replace(" ", "")))
        if len(numbers) >= 2 and numbers[-1] >= SAID_RISE * min(numbers[:-1]) and \
                numbers[-1] - min(numbers[:-1]) >= 0.05:
            return Finding("loss_diverging", step, {"kind": "said", "quote": line.strip()[:300], "lr": None})
    return None
