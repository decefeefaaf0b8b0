"""A loss said to rise or explode, in the words of the program or of the person who pasted the log (`"loss
exploded" threw out and the training is stopped`, `the train loss decrease first and then increase`, `出现了loss
爆炸`): the only evidence of divergence in a report that prints no numbers. Pure: a line in, a finding or None."""

from __future__ import annotations

import re

from loratui.logic.advisor import loss_words, objectives
from loratui.logic.advisor.advice import Finding
from loratui.logic.clauses import sentences
from loratui.logic.fmt import quoted

SAID_WORDS = ("earn", "iverg", "onverg", "收敛", "发散")
"""Words that let a line without the word loss say the same (`the model is not learning`, `training diverged`)."""

_SUBJECT = r"(?:(?<![A-Za-z_])(?:train(?:ing)?[ _])?loss(?:es)?(?![A-Za-z])(?!\s*[_ ]?scal)|损失)"
"""The training loss, also inside Chinese text (`出现了loss爆炸`: no word boundary there); not `val_loss`, not fp16's
loss scale/scaler, whose rise is normal."""
_RISE = (r"(?:explo(?:d\w*|sion)|blew up|blow(?:s|ing)? up|diverg\w*|increas\w*|went up|goes up|going up|climb\w*|"
         r"ris(?:es|ing|e)\b|rose\b|jump(?:s|ed|ing)?\b|spik(?:e|es|ed|ing)\b|skyrocket\w*|shot up|shoots up|"
         r"grow(?:s|ing)?\b|grew\b|(?:gets?|getting|got|becomes?|became|keeps? getting)\s+(?:bigger|larger|higher)\b|"
         r"higher and higher|bigger and bigger|larger and larger|"
         r"(?:gets?|getting|got|becomes?|became|becoming|goes|went|turns?|turned)\s+(?:\w+\s+)?"
         r"(?:worse|huge|enormous|massive|astronomical)\b|worse and worse)")
_SAID = re.compile(
    r"\b(?:training|model|network|net|run|optimi[sz]ation|fine-?tuning)\s+(?:\w+\s+)?diverg(?:es|ed|ing)\b|"
    r"(?:训练|模型)\s*(?:也|又|就|还|突然|开始|竟然|居然|直接|很快|总是|经常|容易)*\s*发散|" +
    _SUBJECT + r"(?P<gap>[^.!?\n,;:=]{0,30}?)\b" + _RISE +
    r"|\b(?:explod\w*|increasing|rising|diverging|growing)\s+(?:train(?:ing)?\s+)?loss\b(?!\s*[_ ]?scal)" +
    r"|\b(?:increase|rise|spike|jump|surge|explosion|blow-?up|divergence)s?\s+(?:of|in)\s+(?:the\s+)?(?:both\s+)?"
    r"(?:train(?:ing)?\s+)?loss(?:es)?\b(?!\s*[_ ]?scal)" +
    r"|" + _SUBJECT + r"\s*(?:值|函数)?\s*(?:也|又|会|就|还|突然|一直|不断|开始|逐渐|竟然|居然|直接|很快|出现了?|的)*\s*"
    r"(?:爆炸|增大|变大|上升|升高|增加|飙升|暴增|暴涨|发散|上涨|越来越大|越来越高|不降反升|不降反增)",
    re.I)
_HELD = re.compile(r"\b(?:not?|never|without|avoid\w*|prevent\w*|stop(?:s|ped)? (?:the )?|instead of|if|whether|"
                   r"probably|possibly|maybe|may|might|could|would)\b|n't\b|"
                   r"[不没未]|避免|防止", re.I)
"""Words that deny, ward off or only suppose the rise (`the loss does not explode`, `how to avoid the loss
exploding`, fairseq's boilerplate `Your loss is probably exploding` beside its fp16 floor, `if the loss explodes`)."""
_OTHER = re.compile(r"\b(?:learning[ _]rate|lr|accuracy|acc|batch|memory|time|steps?|epochs?|scale|lengths?)\b", re.I)
"""Another quantity between the loss and the verb: `loss decreases while the learning rate increases`."""
_NOT_TRAIN = re.compile(r"(?:val(?:id(?:ation)?)?|eval(?:uation)?|test|dev)[ _]$|"
                        r"(?<![A-Za-z])(?:zero|few|one|\d+)[- ]?shot\s+(?:[A-Za-z]+\s+)?$", re.I)
"""A validation loss, or a zero- or few-shot loss (an evaluation's before, or without, training), is no training loss:
these narrower patterns leave it alone (loss_words reads a validation loss rising as overfitting)."""
_CODE = re.compile(r"^\s*(?:def |class |import |from \S+ import|#|//|if |elif |for |while |return |raise |assert |"
                   r"[\w.\[\]'\"]+\s*[-+*/]?=\s)|"
                   r"[=(]\s*\w*loss\w*\s*[,)]")


_NOT_LM = re.compile(objectives.named(objectives.LM_RL + objectives.PREFERENCE, "reward model"), re.I)
"""An objective that is not a language-model loss: a GRPO loss grows with the KL to the reference while the
reward is flat (theLMbook#6), a DPO loss may go anywhere; its rise in words is no divergence."""


def rise_said(line: str, step: int) -> Finding | None:
    """The first clause of `line` that says the training loss rises, explodes or diverges, as a finding: the
    general reader's (`loss_words`) when it reads the line, else these narrower patterns'."""
    if _NAN_CHECK.search(line):
        return None
    said = loss_words.read(line)
    if said is not None:
        return Finding("loss_diverging", step, {"kind": "said", "quote": quoted(line), "lr": None,
                                                "overfit": said.kind == "overfit"}) \
            if said.kind in ("rise", "overfit") else None
    if _CODE.search(line) or _NOT_LM.search(line) or loss_words.TRANSIENT.search(line):
        return None  # TRANSIENT: a spike said to recover, a jump at each epoch's start
    for found in _SAID.finditer(line):
        before = line[max(0, found.start() - 24):found.start()]
        gap = found.group("gap") or ""
        if _NOT_TRAIN.search(before) or _HELD.search(before[-12:] + gap) or _OTHER.search(gap) or \
                _PERSON.search(gap) or _OBJECT.match(line, found.end()):
            continue
        return Finding("loss_diverging", step, {"kind": "said", "quote": quoted(line), "lr": None})
    return _numbers_rise(line, step)


_NAN_CHECK = re.compile(r"diverged with loss\s*=\s*(?:nan|[-+]?inf)|NanLossDuringTrainingError|FloatingPointError|"
                        r"\bInf/NaN\b|\bNaN/Inf\b", re.I)
"""TensorFlow's NaN check (`ERROR:tensorflow:Model diverged with loss = NaN.`, NanLossDuringTrainingError), detectron2's
and fairseq's FloatingPointError (`Predicted boxes or scores contain Inf/NaN. Training has diverged.`, DeFRCN#8): it
names a NaN loss, whatever the loss did before; the NaN is the finding."""
_PERSON = re.compile(r"\b(?:I|we|you|they)\s+(?:\w+\s+)?$")
"""The verb's subject is a person (`the loss went to NaN when I increased the learning rate`): what they raised
is a setting, not the loss."""
_OBJECT = re.compile(r"\s+(?:the\s+|my\s+|our\s+)?(?:learning[ _]rate|lr|batch|epochs?|steps?|warm-?up|"
                     r"lora[ _]?(?:r|rank|alpha)|rank|alpha|dataset|data|model size)\b", re.I)
"""A rise verb with a setting for its object (`increased the learning rate`)."""


_QUANTITY = re.compile(r"\b(?:learning[ _]rate|lr|accuracy|acc|batch|memory|size|lengths?|scale|grad\w*|norm|"
                       r"ppl|perplexity|bleu|wer|cer|f1|map|iou|reward\w*|temperature)\b", re.I)
"""Quantities other than the loss that a sentence may give numbers for (epochs and steps only date a loss)."""
_VALUE_WORD = re.compile(
    r"\b(?:was|is|of|at|from|to|became|becomes|become|reached|reaches|hit|loss|below|above|under)\s+"
    r"(?:about\s+|around\s+|~\s*)?"
    r"(\d{1,3}(?:,\d{3})+|\d{1,3}(?: \d{3})+(?![\d.])|\d+(?:\.\d+)?)(?!\.?\d)"
    r"(?!\s*(?:st|nd|rd|th)\b|\s*%|\s*(?:x|times|epochs?|iter\w*|steps?|k|hours?|h|min\w*|s|sec\w*|days?)\b)",
    re.I)
"""A number the loss is said to be (`was about 100`, `dropped to 70`, `became 800,000`, `from 1.2 to 16 000`), or
a bound it kept (`never dipped below 88`); not an ordinal, a percentage, a count of epochs or steps, a time."""
_RANGE = re.compile(r"\b(?:range|between|typically|usually|default)\b", re.I)
SAID_RISE = 1.2
"""A rise a person reports in numbers: a fifth above the lowest they name. Lower than the printed series' third,
because here the numbers were chosen to show the rise, not sampled with their noise; a step from 2.31 to 2.35 is
still no rise."""


def _numbers_rise(line: str, step: int) -> Finding | None:
    """A sentence about the training loss whose numbers end a third above the lowest before them: `the loss was
    about 100 in the first epoch and dropped to 70 ..., but it suddenly became 800,000`."""
    for sentence in sentences(line):
        if _RANGE.search(sentence):
            continue  # `typically in the range of 0.1 to 0.5`: bounds, not a history
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
            return Finding("loss_diverging", step, {"kind": "said", "quote": quoted(line), "lr": None})
    return None


# -- a loss said to stay flat, or to be zero --------------------------------------------------------------------

_FLAT = (r"(?:(?:is |was |gets? |got |seems? (?:to be )?)?stuck\b|plateau(?:s|ed|ing)?\b|stagnat\w*|"
         r"stop(?:s|ped)?\s+(?:decreas\w*|dropping|going down|improving|falling|changing|moving)\b|"
         r"(?:fluctuat\w*|oscillat\w*|bounc\w*|jump\w* back and forth)\s+(?:around|about|near|between)\s+~?\d|"
         r"(?:stays?|stayed|staying|remains?|remained|keeps?|kept|sits?|sitting|sat|hover(?:s|ed|ing)?|is always|was always|"
         r"(?:is |was |are |always )*maintain(?:s|ed)?|"
         r"(?:is|was) still|fixe[sd]|locks?|locked)\s+(?:at|around|about|near|on|in|the same|constant|unchanged|"
         r"flat|~?\d)|"
         r"(?:(?:does|did|do|is|was|are|were|has|have)\s*(?:not|n't)|never|won't|can't|cannot|isn't|wasn't|"
         r"doesn't|didn't|don't|hasn't|no longer|not)\s+(?:seem to\s+|even\s+|really\s+|at all\s+)?"
         r"(?:decreas\w*|drop\w*|go(?:es|ing)? down|fall\w*|fell|chang\w*|mov\w*|converg\w*|improv\w*|go(?:es|ing)? lower|"
         r"(?:go(?:es|ing)?|get(?:s|ting)?|drop(?:s|ping)?|fall(?:s|ing)?)\s+(?:any\s+)?(?:below|under|lower)\b|"
         r"reduc\w*|learn\w*)|"
         r"unchang\w*|not chang\w*|(?:is|are|was|were|stays?|stayed|remains?|remained|keeps?|kept)\s+(?:\w+\s+)?constant\b|barely (?:chang|mov|decreas|drop|learn)\w*|(?:is|stays?|remains?) flat\b|"
         r"(?:decreas|drop|fall)\w* (?:very |extremely |really |so |too )?slowly"
         r"(?!\s*(?:at (?:the )?(?:first|start|beginning)|initially|in the beginning|early|for the first)))")
_FLAT_SAID = re.compile(
    _SUBJECT + r"(?P<gap>(?:[^.!?\n,;:=]|\.(?=\d)){0,40}?)\b" + _FLAT +
    r"|\bno (?:improvement|decrease|progress|change|drop|reduction|movement)s? (?:in|of|on) (?:the )?"
    r"(?:train(?:ing)? )?loss\b"
    r"|\b(?:model|network|net|nn|it)\b[^.!?\n,;]{0,20}?\b(?:is not|isn't|does not|doesn't|did not|didn't|not|never|"
    r"fails? to|failed to|won't|can't|cannot|is n't)\s+(?:really\s+|even\s+)?(?:learn\w*|converg\w*)"
    r"|模型\s*(?:也|又|就|还|始终|一直|总是|基本|几乎|都)*\s*(?:不收敛|没有?收敛|学不到|不学习|没有?学到)"
    r"|" + _SUBJECT + r",\s+(?:not|never)\s+(?:going down|decreasing|dropping|changing|moving|improving)\b" +
    r"|" + _SUBJECT + r"\s*(?:值|函数)?\s*(?:也|又|就|还|始终|一直|总是|基本|几乎|都)*\s*"
    r"(?:不下降|不降|不变|没有?(?:下降|变化|收敛|降)|降不下去|下不去|不收敛|卡在|停在|保持在|维持在|稳定在|一直是|一直为|"
    r"下降(?:得)?(?:很|非常|特别|极其)?(?:缓慢|慢)|"
    r"一直在|始终是|始终为|都是|是一个定值|为定值|不动)",
    re.I)
_ZERO_SAID = re.compile(
    _SUBJECT + r"[^.!?\n,;:=]{0,30}?\b(?:is|was|becomes?|became|turn(?:s|ed)? (?:into|to)|goes to|went to|drops? to|"
    r"dropped to|falls? to|fell to|reach(?:es|ed)? |gets?|got|stays? at|equals?)\s*(?:exactly\s+)?(?:0(?:\.0+)?|zero)\b"
    r"(?!\.\d)|\b(?:got|get|gets|getting|see|saw|a|zero|0)\s+(?:0(?:\.0+)?|zero)?\s*(?:training\s+|train\s+)?loss\b"
    r"(?<!\ba loss)(?<!\bsee loss)(?<!\bsaw loss)|" + _SUBJECT + r"\s*(?:一直|始终|都|就|变成了?|变为|为|是|等于)+\s*0(?![.\d])",
    re.I)
"""`the loss turned into zero`, `some users got 0 loss`, `zero training loss`, `loss一直为0`."""


def flat_said(line: str, step: int) -> Finding | None:
    """The first clause of `line` that says the training loss stays put (`loss stuck at 2.3`, `the loss does not
    decrease`, `plateaus at ~4.0`, `becomes huge and unchanged`, `loss一直是2.98`, `loss不下降`) or is zero (`got 0
    loss`), as a finding: the evidence of a report with few or no printed numbers."""
    still = loss_words.REWARD_STILL.search(line) if "eward" in line else None
    if still is not None and not still.group().startswith(("rewards/", "reward/")) and not _CODE.search(line):
        # the reward, an RL objective's measure, said to stay at 0 or never grow: nothing is learned (slime#1411
        # `the raw reward didn't grow effectively`), whatever its loss does; not a DPO's `rewards/margins` at 0,
        # which is where every DPO run starts
        return Finding("loss_flat", step, {"kind": "said", "quote": quoted(line), "what": "reward"})
    said = loss_words.read(line)
    if said is not None:
        if said.kind == "zero":
            return Finding("loss_zero", step, {"kind": "said", "quote": quoted(line)})
        return Finding("loss_flat", step, {"kind": "said", "quote": quoted(line)}) if said.kind == "flat" \
            else None
    lowered = line.lower()
    patterns = [(pattern, kind) for pattern, kind, hints in _HINTED if hints.search(lowered)]
    if not patterns or _CODE.search(line):
        return None  # the word tests first: this runs on every line that names a loss
    for pattern, kind in patterns:
        for found in pattern.finditer(line):
            before = line[max(0, found.start() - 24):found.start()]
            gap = (found.groupdict().get("gap") or "") if kind == "flat" else ""
            if _NOT_TRAIN.search(before) or _HELD_FLAT.search(before[-14:]) or _OTHER_FLAT.search(gap):
                continue
            if kind == "zero":
                if _NOT_LM.search(line) or _COUNTER_BEFORE.search(line[:found.start()]):
                    continue  # a GRPO loss is 0 at its first steps by design; `step 0 loss 3.68` is step 0's loss
                return Finding("loss_zero", step, {"kind": "said", "quote": quoted(line)})
            return Finding("loss_flat", step, {"kind": "said", "quote": quoted(line)})
    return None


_ONE_CLASS = re.compile(
    r"\b(?:only|always|just)\s+(?:predicts?|predicting|predicted|outputs?|outputting|classif(?:ies|y))\s+"
    r"(?:a single|one|the same|just one)\s+(?:class|label|category|value|token)\b|"
    r"\b(?:predicts?|predicting|predicted|outputs?|outputting)\s+the same\s+(?:class|label|category|value|token|"
    r"prediction|output)s?\s+(?:for|on|to)\s+(?:every|all|each|any)\b|"
    r"\b(?:accuracy|acc)\b[^.!?\n]{0,20}?\b(?:is stuck|stuck|fixe[sd]|stays?|stayed|remains?|remained|locks?|sits?)\s+"
    r"(?:at|around|on)\s+(?:0?\.\d+|\d+(?:\.\d+)?\s*%)|"
    r"(?:准确率|acc)\s*(?:一直|始终|总是)\s*(?:是|为|在)?\s*\d",
    re.I)
"""A classifier said to answer one class whatever the input, or its accuracy said to sit at one value (keras#4066:
`it only predicts a single class and accuracy fixes at 0.1`): the loss is stuck at the class prior, nothing is
learned."""
_HINTED = (
    (_ZERO_SAID, "zero", ("zero", "0 loss", "is 0", "was 0", "s 0", "e 0", "d 0", "to 0", "at 0", "t 0", "exactly 0",
                          "为0", "是0", "成0", "于0")),
    (_FLAT_SAID, "flat", ("stuck", "plateau", "stay", "remain", "keep", "kept", "sit", "sat ", "hover", "always",
                          "maintain", "slowly", "下降", "barely",
                          "still", "fixe", "lock", "not", "n't", "never", "unchang", "constant", "barely", "flat",
                          "cannot", "no longer", "stagnat", "stop", "fluctuat", "oscillat", "bounc", "no ", "learn", "converg",
                          "不", "没", "一直", "始终", "总是", "卡在", "停在", "保持", "维持",
                          "稳定", "都是", "定值")),
    (_ONE_CLASS, "flat", ("only", "always", "just", "the same", "acc", "准确率")),
)
_HINTED = tuple((pattern, kind, re.compile("|".join(map(re.escape, hints)))) for pattern, kind, hints in _HINTED)
"""Each pattern with words one of which a line must hold for it to be tried: most lines naming a loss are logs."""
_OTHER_FLAT = re.compile(r"\b(?:learning[ _]rate|lr|accuracy|acc|batch|memory|scale|lengths?|grad\w*|norm)\b", re.I)
"""Another quantity between the loss and the verb (`loss falls but the learning rate stays at 0`); an epoch or a
step there only dates the loss (`loss since 2nd epoch becomes huge and unchanged`)."""
_COUNTER_BEFORE = re.compile(r"\b(?:step|epoch|iter(?:ation)?|it|batch|round|rank|gpu|device|cuda|worker|"
                             r"layer|head|fold|stage|task)s?\s*[:=#]?\s*$", re.I)
"""A zero that is a counter's value, right before a loss (`step 0 loss 3.6815`, `Epoch 0 loss: 2.31`, `rank 0 loss
2.1`): the first step's loss or one rank's, not a loss of zero."""
_HELD_FLAT = re.compile(r"\b(?:if|whether|how (?:to|do|can)|avoid\w*|prevent\w*|unless|when|in case)\b|如果|避免|防止", re.I)
"""Words that only suppose the loss stays put (`if the loss does not decrease`); a negation is the report here."""
