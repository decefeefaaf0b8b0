"""A non-finite training signal read from a line of text in any dialect: a log line (`loss: nan - acc: 0.1`,
`| loss nan |`, `train/loss: nan`, `eval_loss = inf`), the program's words (`Non-finite loss`, `Detected NaN in
the gradients`, `FloatingPointError`, `Input contains NaN`) and the user's (`the losses are all NaN`, `NaN after a
few iterations`, `loss变成nan`).

Read the way a maintainer reads: a non-finite word (nan, inf, -inf, Infinity, non-finite) standing as a word of its
own, tied to a training signal (a loss, gradients, outputs) by a separator or within one clause, or to a verb that
says it happened. Not a NaN: `nan` inside a name or a path (`nan_to_num`, `isnan`, `/data/nan/`), a flag or a
setting (`--detect_nan`, `max_grad_norm: inf`, `loss_scale`), a negation (`the loss is not nan`), a hypothetical or
a precaution (`check whether the loss is nan`, `how to avoid nan?`). Pure: strings in, answers out."""

from __future__ import annotations

import re
from dataclasses import dataclass

from loratui.logic.clauses import clauses
from loratui.logic.text_reader.values import stated_learning_rate

_A = r"A-Za-z0-9_"
"""Word characters in ASCII: Chinese beside a NaN (`loss为nan的情况`) is still a word boundary."""
TOKEN = (rf"(?<![{_A}.\\/$-])(?:[-+]\s?)?(?:nan|inf(?:inity)?|non-?finite|not finite)s?"
         rf"(?![{_A}(\\-]|\.[{_A}]|/(?!inf)[{_A}])")
"""A non-finite word of its own: `NaN`, `nan`, `NaNs`, `inf`, `-inf`, `Infinity`, `non-finite`, `NaN/Inf`."""
_TOKEN = re.compile(TOKEN, re.I)
_SIGNAL = (r"(?:(?!(?:to|the|with|and|or|of|for|in|on|at|is|was|as|a|an|my|our|its|their|this|that|no|all|any|"
           r"some|but|so|then|from|by|into)\s)[{a}]*[_/. ])?(?:loss(?:es)?|gradients?|grads?|grad[ _]norm|gnorm|logits|outputs?|activations|"
           r"hidden[ _]states|predictions|weights|nll|ppl|perplexity|xent|cross[- _]?entropy)(?:[_/][{a}]+)?|"
           r"损失|梯度").format(a=_A)
"""A training signal, with its prefix or suffix (`eval_loss`, `train/loss`, `loss_cls`, `lm loss`); not the word before
it in a sentence (`diverged with loss = NaN`, `started to output nan`: `loss`, `output`, not `with loss`)."""
_BARE_SIGNAL = re.compile(rf"(?<![{_A}])(?:(?:[A-Za-z0-9]+_)*loss(?:es)?(?:_[A-Za-z0-9]+)*|gradients?|grads?|"
                          rf"grad[ _]norm|gnorm|logits|outputs?|activations|hidden[ _]states|predictions|weights|nll|ppl|"
                          rf"perplexity|xent|cross[- _]?entropy)(?![{_A}])|损失|梯度", re.I)
"""A signal named in prose (`the losses are all NaN`), a loss by its own name too (`the loss_rcnn_bbox values are
Nan`, `rpn_loss is nan`: detection models print one loss per head)."""
_NOT_SIGNAL = re.compile(r"scal(?:e|er|ing)|max|min(?![a-z])|clip|thresh|patience|delta|limit|warmup|check|detect|skip|"
                         r"weight[ _]decay|best|lowest|prev", re.I)
"""Settings named after a signal (`loss_scale`, `max_grad_norm: inf`, `clip_grad_norm`) and the starting value of a
best-so-far (`best_val_loss: inf`): their value is no reading."""
_KEYED = re.compile(rf"(?<![{_A}])({_SIGNAL})['\"]?\s*(?:[:=|]\s*|\s)\s*(?:tensor\(\s*|\[\s*)?['\"]?({TOKEN})", re.I)
"""A signal and its value: `loss: nan`, `eval_loss = inf`, `train/loss: nan`, `| loss nan |`, `lm loss: nan`, OpenNMT's
cross-entropy `xent: nan`."""
_NEAR = 60
"""A signal and a non-finite word this close in one clause are one statement (`the losses are all NaN`)."""
_EVENT = re.compile(
    rf"(?:\b(?:got|gets?|getting|bec[oa]me|becomes|becoming|turn(?:s|ed|ing)?(?: in)?to|go(?:es)? to|went to|going to|"
    rf"produc(?:e|es|ed|ing)|returns?|returned|yield(?:s|ed)?|gives?|gave|giving|results? in|resulted in|"
    rf"ends? up (?:with|as)|encounter(?:s|ed)?|detected|found|contains?|exploded? to|"
    rf"(?:go(?:es)?|went|going|turn(?:s|ed)?) to be|collaps(?:e|es|ed|ing) (?:with|to|into)|"
    rf"(?:crash(?:es|ed)?|diverg(?:e|es|ed)) (?:with|to))|"
    rf"出现了?|变成了?|变为|成了?|就|又|容易|经常|总是|直接)\s*(?:(?:a|all|only|some|the|just)\s+)?({TOKEN})|"
    rf"({TOKEN})\s*(?:(?:values?|loss(?:es)?)\s+)?(?:after|from the first|since|at (?:step|iter|epoch)|"
    rf"detected|encountered|occur(?:s|red|ring)?|appear(?:s|ed|ing)?|happen(?:s|ed|ing)?|shows? up|showed up|"
    rf"values? in|again|during|while|when (?:training|using|I|we|the)|出现|了)\b",
    re.I)
"""A non-finite value that happened, with or without its signal's name: `getting nan`, `NaN after a few
iterations`, `出现nan`, `Input contains NaN`, `nan values in`, `returned nan`."""
_NEGATED = re.compile(rf"(?:\bnot|\bno|\bnever|\bwithout|n't|\bnor)\s+(?:\w+\s+)?(?:a\s+|any\s+)?{TOKEN}|"
                      rf"\bno longer\s+(?:\w+\s+){{0,2}}{TOKEN}|"
                      rf"(?:没有?|不会|不再|不是|未|无)\s*(?:再\s*)?(?:会\s*)?(?:出现|变成|变为|是|有)?\s*(?:过\s*)?{TOKEN}|"
                      rf"\b(?:whether|avoid\w*|prevent\w*|check(?:s|ed|ing)?|in case|to detect)\b|"
                      rf"\bif\s+(?:the\s+|any\s+|not\s+)?(?:loss|grad\w*|torch|math|np)\b|"
                      rf"\bfrom\s+{TOKEN}|{TOKEN}\s*(?:-+>|→|to\s+[-+]?\.?\d)|"
                      rf"\bisnan\b|\bisinf\b|nan_to_num|float\(\s*['\"]|np\.(?:nan|inf)\b|math\.(?:nan|inf)\b",
                      re.I)
"""A clause that says a NaN did not happen, or might: a negation (`no longer crashes with nan`, 没有出现nan, 不再是nan
too), a hypothetical, a guard, code; or an inf that is only where a best-so-far started (Keras' `val_loss improved from inf to 0.45`,
`Validation loss decreased (inf --> 0.69)`)."""
_PROGRAM = re.compile(r"\bFloatingPointError\b|\bNaN/Inf\b|\bnan or inf\b|\binf or nan\b|"
                      r"\bInvalid loss\b(?!\s*(?:function|type|name|fn|key|class))|"
                      r"to satisfy the constraint \w+\(\), but found invalid values|\bhad (?:NaN|Inf) values\b", re.I)
"""Exceptions and checks that only name a non-finite value: fairseq's and JAX's FloatingPointError, Lightning's
`was NaN/Inf`, `Detected inf or nan values`, Keras' TerminateOnNaN (`Batch 312: Invalid loss, terminating
training`), torch.distributions given NaN parameters (`Expected parameter loc ... to satisfy the constraint Real(),
but found invalid values`), TensorFlow's check_numerics (`Tensor had NaN values`)."""
_COUNTER_ROW = re.compile(rf"^\s*\d+/\d+\s+(?:[-+]?\d+(?:\.\d+)?[KMG]?\s+)*?{TOKEN}\s", re.I)
"""A training row that starts at its epoch counter and holds a non-finite cell (ultralytics' `  1/100  3.35G  nan
nan  nan  29  640: 100%|...`): its columns are the losses."""
_PRINTED = re.compile(rf"\b(?:tensor|Tensor|array)\(\s*\[*\s*({TOKEN})", re.I)
"""A value printed non-finite, named by no key: `tensor(nan, device='cuda:0', grad_fn=<NllLossBackward0>)`,
`tensor([[nan, nan, ...`, TensorFlow's `tf.Tensor(nan, shape=(), dtype=float32)`."""
_LOSS_FN = re.compile(r"grad_fn=<\w*Loss\w*>|Loss\w*Backward", re.I)


@dataclass(frozen=True)
class NonFinite:
    what: str  # the key it was printed under (`eval_loss`), else the signal: loss, gradients, outputs
    value: str  # nan, inf, -inf, non-finite


_MARKUP = re.compile(r"`+|\*\*|(?<![\w*])[_*](?=[A-Za-z])|(?<=[A-Za-z])[_*](?![\w*])")
"""Markdown's code, bold and italic marks: an issue's prose quotes a value as `nan`, **NaN** or _Loss: nan_, and the
words around it are read the same without them (`the model is quite easy get `nan``; pytorch-semseg#86's `Here comes
that _Loss: nan_ all the time`). An underscore inside a name stays (`nan_to_num`, `loss_cls`)."""


_LOSS_FINE = re.compile(r"\bloss(?:es)?\s+(?:is|are|was|were|looks?|seems?|stays?|remains?)\s+(?:\w+\s+)?"
                        r"(?:normal|fine|ok|okay|good|decreasing|stable|finite)\b|loss\s*(?:正常|没问题)", re.I)
"""The loss said to be fine in the same line (`grad_norm xx.xxxx (inf) but the loss is normal`)."""
_PASSED = re.compile(r"\b(?:back|returns?|returned|goes back|went back)\s+to\s+normal\b|\bnormal\s+again\b|"
                     r"(?<!never )(?<!not )(?<!n't )\brecover(?:s|ed|ing)?\b|恢复正常|又正常", re.I)
"""A non-finite gradient said to pass (`grad_norm appears to be inf and then nan and then back to normal`,
VideoMAEv2#53): mixed precision's scaler skipped those steps and lowered its scale, as with a loss said fine."""


def read(line: str) -> NonFinite | None:
    """The non-finite training signal the line states, or None. A non-finite gradient beside a loss said to be fine
    is mixed precision's loss scaler at work (it skips that step and lowers its scale), not a run gone NaN."""
    found = _read(line)
    if found is not None and found.what == "gradients" and (_LOSS_FINE.search(line) or _PASSED.search(line)):
        # unless another clause says the loss went bad after all (`... the loss is normal at first, then it becomes nan`)
        return next((other for clause in clauses(_MARKUP.sub("", line)) if not _LOSS_FINE.search(clause)
                     for other in [_in_clause(clause)] if other is not None and other.what != "gradients"), None)
    return found


def _read(line: str) -> NonFinite | None:
    if len(line) > 2000:
        return None
    lowered = line.lower()
    if "nan" not in lowered and "inf" not in lowered and "finite" not in lowered and not _PROGRAM.search(line):
        return None  # the cheap test first: most lines of a log name no non-finite value
    line = _MARKUP.sub("", line)  # before the token test: `_Loss: nan_` holds `nan` only once its marks are gone
    if not _TOKEN.search(line) and not _PROGRAM.search(line):
        return None
    keyed = _keyed(line)
    if keyed is not None:
        return keyed
    if _COUNTER_ROW.search(line):
        return NonFinite("loss", _value(_TOKEN.search(line).group(0)))  # type: ignore[union-attr]
    printed = _PRINTED.search(line)
    if printed is not None:
        return NonFinite("loss" if _LOSS_FN.search(line) else "outputs", _value(printed.group(1)))
    program = _PROGRAM.search(line)
    if program is not None and not _NEGATED.search(line):
        token = _TOKEN.search(line)
        return NonFinite(_what(line[:program.start()] + program.group(0)), _value(token.group(0)) if token else "nan")
    for clause in clauses(line):
        found = _in_clause(clause)
        if found is not None:
            return found
    return None


def _keyed(line: str) -> NonFinite | None:
    for m in _KEYED.finditer(line):
        if not _NOT_SIGNAL.search(m.group(1)):
            return NonFinite(m.group(1).strip(), _value(m.group(2)))  # the key as printed: `grad_norm`, `lm loss`
    return None


def _in_clause(clause: str) -> NonFinite | None:
    if _NEGATED.search(clause):
        return None
    token = _TOKEN.search(clause)
    if _PROGRAM.search(clause):
        return NonFinite(_what(clause), _value(token.group(0)) if token else "nan")
    if token is None:
        return None
    signal = _signal_near(clause, token)
    if signal is not None:
        return NonFinite(_what(signal), _value(token.group(0)))
    event = _EVENT.search(clause)
    if event is not None:
        return NonFinite("loss", _value(event.group(1) or event.group(2)))
    return None


def _signal_near(clause: str, token: re.Match[str]) -> str | None:
    for m in _BARE_SIGNAL.finditer(clause):
        gap = token.start() - m.end() if m.end() <= token.start() else m.start() - token.end()
        between = clause[min(m.end(), token.end()):max(m.start(), token.start())]
        if 0 <= gap <= _NEAR and not _NOT_SIGNAL.search(m.group(0)) and not _NOT_SIGNAL.search(between):
            return m.group(0)
    return None


def _what(signal: str) -> str:
    lowered = signal.lower()
    if "grad" in lowered or "梯度" in signal:
        return "gradients"
    if any(word in lowered for word in ("output", "logit", "activation", "hidden", "prediction", "weight")):
        return "outputs"
    return "loss"


def _value(token: str) -> str:
    lowered = token.lower().replace(" ", "").rstrip("s")
    if lowered.startswith("nan"):
        return "nan"
    if "finite" in lowered:
        return "non-finite"
    return "-inf" if lowered.startswith("-") else "inf"


_LOGGED = re.compile(r"""['"](?:loss|grad_norm|eval_loss|learning_rate)['"]\s*:""")
"""Keys of a printed dict the log reader takes as a training or eval log: the loss watch reads those (and knows
fp16's first overflows, a NaN logged as 0.0)."""


def unlogged(line: str) -> NonFinite | None:
    """A non-finite value keyed in a printed dict (or JSON line) that is not a training log: wandb's
    `{"train/loss": NaN, "_step": 120}`, a summary's `'train_loss': nan`, Lightning's `{'val_loss': nan}`."""
    if len(line) > 2000 or _LOGGED.search(line):
        return None
    return _keyed(line)


def hedged(line: str) -> bool:
    """The line says a NaN did not happen, or only might (a negation, a precaution, code)."""
    return _NEGATED.search(line) is not None


_SCALE_TO = re.compile(r"(?:reduc\w*|decreas\w*|lower\w*|sett?(?:ing)?|halv\w*)\b[^\n]{0,60}?\bto:?\s*"
                       r"([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)(?![\w.])", re.I)
_LOSS_SCALE = re.compile(r"loss[ _]?scal|overflow|grad(?:ient)?[ _]scal", re.I)
"""The scale is the loss scaler's (not a learning-rate or an augmentation scale)."""
FLOOR_SCALE = 1.0
"""fp16's dynamic loss scale starts at 2^16 and halves at each overflow; down to 1 the gradients overflow even
unscaled (every step is skipped): the scaler's own floor is there or near (DeepSpeed, apex; fairseq goes on to
1e-4 before giving up)."""


_SCALE_SMALL = re.compile(r"\b(?:loss|grad(?:ient)?)[ _]scale\s+(?:is|was|became|got)\s+(?:too\s+)?small\b"
                          r"(?::\s*([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?))?", re.I)
"""A scale said to be small (icefall's `RuntimeError: grad_scale is too small, exiting` and its warning `Grad scale is
small: 1.29e-26`), with the value where it is printed."""


def scale_floor(line: str) -> bool:
    """fp16's loss scaler cut its scale to 1 or below (`Gradient overflow. Skipping step, loss scaler 0 reducing
    loss scale to 0.5`, `Attempted loss scale: 2, reducing to 1`, `Grad scale is small: 1.29e-26`), whatever the
    tool's wording."""
    if not _LOSS_SCALE.search(line):
        return False
    small = _SCALE_SMALL.search(line)
    if small is not None:
        return small.group(1) is None or float(small.group(1)) <= FLOOR_SCALE
    m = _SCALE_TO.search(line)
    return m is not None and float(m.group(1)) <= FLOOR_SCALE


def learning_rate(line: str) -> float | None:
    """The learning rate a line says (`lr 2e-4`, `learning_rate=0.0002`, `学习率 1e-5`; values.stated_learning_rate,
    the loss line's reader too), or None: a paste's NaN advice then names it rather than say loratui does not know
    it. A value no optimiser takes (0, 10 or more) is no learning rate to lower."""
    value = stated_learning_rate(line)
    return value if value is not None and 0 < value < 10 else None
