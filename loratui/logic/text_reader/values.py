"""Numbers and log records in training text: printed Trainer dicts, JSON lines, `key: value` loss lines.

One parser of a printed Trainer log dict for the whole package (doctor, import, watched commands). The
Trainer prints `str(dict)`, so a NaN loss reads `nan` and an overflow `inf`; transformers 5 prints numbers as
strings (`'loss': '1.23'`); axolotl adds keys with slashes and parentheses (`'memory/max_mem_active(gib)'`).
Pure: strings in, dicts of floats out.
"""

from __future__ import annotations

import json
import math
import re

from loratui import events
from loratui.logic.text_reader import epochs

TRAIN_KEYS = frozenset({"loss", "grad_norm", "learning_rate"})
"""Keys that mark a record as a training-step log."""
MAX_RECORD = 20_000
"""Longer fragments are not log records (a dict that long is a dump, not a log line)."""

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|NaN|inf|Inf|Infinity)"
_VALUE = re.compile(rf"\s*(?:tensor\(\s*)?['\"]?({_NUMBER})['\"]?\s*(?:[,)}}]|$)")
_DICT = re.compile(r"\{\s*(['\"])[^'\"]{1,200}\1\s*:")
_KEY = re.compile(r"(['\"])([^'\"]{1,200})\1\s*:")
_STEP_OF = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def number(text: str) -> float | None:
    """A float from printed text: 2.31, '2.31', nan, inf, -inf, Infinity; anything else None."""
    try:
        value = float(text.strip().strip("'\""))
    except ValueError:
        return None
    return value


def find_dict(fragment: str) -> int:
    """Where a printed dict starts in a fragment (-1 when there is none)."""
    if "{" not in fragment or len(fragment) > MAX_RECORD:
        return -1
    found = _DICT.search(fragment)
    return found.start() if found else -1


def printed_dict(text: str) -> tuple[dict[str, float], dict[str, str]]:
    """(numeric values, other values) of a printed dict `{'loss': 1.2, 'grad_norm': nan, ...}`.

    Read key by key rather than with `ast.literal_eval`, which rejects `nan` and `inf` and a dict cut off
    by a progress bar redraw; a value that is not a number is kept as text (`'global_step/max_steps': '5/9'`).
    """
    numbers: dict[str, float] = {}
    texts: dict[str, str] = {}
    keys = list(_KEY.finditer(text))
    for index, match in enumerate(keys):
        end = keys[index + 1].start() if index + 1 < len(keys) else len(text)
        raw = text[match.end():end]
        found = _VALUE.match(raw)
        if found:
            value = number(found.group(1))
            if value is not None:
                numbers[match.group(2)] = value
                continue
        texts[match.group(2)] = raw.strip().rstrip(",}").strip().strip("'\"")[:200]
    return numbers, texts


def json_record(fragment: str) -> dict[str, object] | None:
    """A JSON object on one line (LLaMA-Factory's trainer_log.jsonl), or None."""
    text = fragment.strip()
    if not (text.startswith('{"') and text.endswith("}")) or len(text) > MAX_RECORD:
        return None
    try:
        # Python's json reads the NaN and Infinity that json.dump writes for a NaN loss.
        raw = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return raw if isinstance(raw, dict) else None


def json_values(raw: dict[str, object]) -> tuple[int | None, int | None, dict[str, float]]:
    """(step, total steps, numeric values) of a LLaMA-Factory trainer_log.jsonl record."""
    step = _int(raw.get("current_steps", raw.get("step", raw.get("global_step"))))
    total = _int(raw.get("total_steps"))
    values = {}
    for key, value in raw.items():
        if key in ("current_steps", "total_steps", "percentage", "step", "global_step", "kind", "t"):
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            values[key] = float(value)
    return step, total, values


STEP_KEYS = ("step", "global_step", "steps", "iter", "iteration", "train/global_step", "trainer/global_step")
"""A printed dict's own step counter (`{'loss': 0.52, 'step': 40}` from a hand-written loop, wandb's
`train/global_step`): the step it was logged at, whatever a progress bar on the other stream shows."""


def step_of(texts: dict[str, str], numbers: dict[str, float]) -> tuple[int | None, int | None]:
    """(step, total) of a printed dict: swift's `'global_step/max_steps': '5/2169'`, else its own whole-numbered step
    key, which is taken out of `numbers` (it is the record's step, not a metric of it)."""
    raw = texts.get("global_step/max_steps") or texts.get("global_step")
    found = _STEP_OF.match(raw) if raw else None
    if found:
        return int(found.group(1)), int(found.group(2))
    for key in STEP_KEYS:
        value = numbers.get(key)
        if value is not None and math.isfinite(value) and value >= 0 and value == int(value):
            del numbers[key]
            return int(value), None
    return None, None


_SUMMARY_KEYS = ("train_runtime", "total_flos", "train_samples_per_second", "train_steps_per_second")


def epoch_train_loss(values: dict[str, float]) -> dict[str, float]:
    """A hand-written loop's per-epoch dict (`{'train_loss': 2.31, 'val_loss': 2.4, 'epoch': 1}`) with its training
    loss as `loss`; the Trainer's end-of-training summary (`train_loss` beside `train_runtime`) stays as it is."""
    if "train_loss" not in values or "loss" in values or any(k in values for k in _SUMMARY_KEYS):
        return values
    renamed = {("loss" if k == "train_loss" else k): x for k, x in values.items()}
    return renamed


def is_record(values: dict[str, float]) -> bool:
    """Whether parsed values are a Trainer log: training keys, eval metrics or the end-of-training summary."""
    return bool(TRAIN_KEYS & values.keys()) or "train_runtime" in values or is_eval(values)


def is_train(values: dict[str, float]) -> bool:
    """A training-step log (not an eval log, not the end-of-training summary)."""
    return bool(TRAIN_KEYS & values.keys()) and not events.is_train_summary(values) and not is_eval(values)


def is_eval(values: dict[str, float]) -> bool:
    return any(key.startswith("eval_") for key in values)


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return int(value)


# -- `step N ... loss X` lines ----------------------------------------------------------------------------

_KEY_ALIASES = {
    "loss": "loss", "train loss": "loss", "training loss": "loss", "avr loss": "loss", "avg loss": "loss",
    "ave loss": "loss", "average loss": "loss", "mean loss": "loss", "running loss": "loss", "lr": "learning_rate",
    "learning rate": "learning_rate", "grad norm": "grad_norm", "gnorm": "grad_norm", "total loss": "loss",
    "xent": "loss", "loss train": "loss", "loss training": "loss",
    "损失": "loss", "损失值": "loss",
}
# `loss: X`, `loss=X`, `loss = X`, also as a printed tensor (`loss: tensor(2.3456, device='cuda:0')`); a bare
# space (`step 5 loss 22.4671`) is `_SPACED`'s, which wants a decimal point so prose ("loss 2 times") is no value.
_SEP_NUM = rf"(?:\s*[:=]\s*|\s+=\s*)(?:tensor\(\s*)?({_NUMBER})(?![\w.]|\s*[*/+])"
_PAIRS = re.compile(
    r"(?<![\w/])(train(?:ing)?[ _]loss|(?:avr|avg|ave|average|mean|running|total)[ _]loss|loss[ _]train(?:ing)?|"
    r"loss|xent|"
    r"grad[ _]norm|gnorm)" + _SEP_NUM + r"|(损失值?)\s*[:：=]\s*(" + _NUMBER + r")", re.I)
"""Also kohya/musubi's `avr_loss=` and the `avg_loss` / `running_loss` of hand-written loops: a training loss
averaged over the last steps, the one number those loops print; LitGPT's `loss train: 2.431, val: n/a`."""
_LR_STATED = re.compile(r"(?:(?<![A-Za-z0-9_])(?:lr|learning[ _-]?rate)(?![A-Za-z_])|学习率)\s*"
                        r"(?:(?:of|is|was|at|to|as|为|是)\s*)?[=:：]?\s*(?:tensor\(\s*)?"
                        rf"({_NUMBER})(?![\w.]|\s*[*/+%])", re.I)
"""`lr: 2e-4`, `lr=5E-05`, `learning_rate = 0.0002`, `lr: tensor(2e-4)`, and as people write it, `lr 2e-4`,
`learning rate of 1e-5`, `学习率为3e-4`; not a sum or a share (`lr=2e-4*8`, `warmup 100%`)."""


def stated_learning_rate(text: str) -> float | None:
    """The learning rate a line states, logged or in words (the first one), or None. One reader for the loss
    line's `learning_rate` and a pasted NaN's rate (advisor/nan_text), so the two never disagree."""
    found = _LR_STATED.search(text)
    return number(found.group(1)) if found else None


_BEFORE = re.compile(rf"(?<![\w./])({_NUMBER})\s+(loss|LR|lr|learning rate)\b(?!\s*[:=])")
"""`11.8750 loss` (tinygrad); never a counter's total (`step 4/4000  loss --`: loratui's own line before the first
log read as a loss of 4000)."""
_SPACED = re.compile(r"(?<![\w/])(train(?:ing)?[ _]loss|loss)\s+([-+]?\d+\.\d+(?:[eE][-+]?\d+)?|nan|NaN|inf)"
                     r"(?=[\s,;|)]|$)")
"""`loss 10.8259,` (LitGPT, fairseq-style `| loss 2.31 |`): a loss with only a space before its value, which
then needs a decimal point (or nan/inf) so that prose (`loss 2 times`) is not read as a value."""
_STEP = re.compile(r"(?<![\w/])(?:global[ _])?step(?:\s*[=:]\s*|\s+)(\d{1,9})\b(?!\s*/)", re.I)
"""`step 5`, `step=5`, TensorFlow's `step = 100`."""
# `Step 5/100 | loss ...`: the step of a step-of-total counter.
_STEP_SLASH = re.compile(r"(?<![\w/])(?:global[ _])?step(?:\s*[=:]\s*|\s+)(\d{1,9})\s*/\s*\d{1,9}\b", re.I)
_ITER = re.compile(r"(?<![\w/])iter(?:ation)?(?:\s*[=:]\s*|\s+)(\d{1,9})\b", re.I)
"""detectron2's `iter: 19`, nanoGPT's `iter 100:`, `Iteration 200`, `Iter: 7/900`: the step where no `step` is named
(LitGPT's `iter 77 step 39` counts micro-batches in `iter`, optimizer steps in `step`)."""
_BRACKET = re.compile(r"\[\s*(\d{1,9})\s*/\s*(\d{1,9})\s*\]")
_LEADING = re.compile(r"^\s{0,8}(\d{1,9})\s+\S")


def loss_line(fragment: str) -> tuple[int | None, dict[str, float]] | None:
    """(explicit step or None, values) of a `step N ... loss X` line in any framework's spelling, or None.

    Reads `loss: 2.75`, `loss=15.50`, `loss = 0.0630`, `Loss: 0.9741`, `train loss:1.10886`, LitGPT's
    `loss 10.8259,` and tinygrad's `11.8750 loss`; the step from `global step 435`, `step=1`, `Step 0`,
    `[200/735]` or a leading counter.
    """
    if len(fragment) > 2000:
        return None
    if "iteration" in fragment:
        megatron = megatron_line(fragment)
        if megatron is not None:
            return megatron
    if not ("oss" in fragment or "OSS" in fragment or "损失" in fragment or "xent:" in fragment) or \
            _ADVERSARIAL.search(fragment):
        return None
    values = _line_values(fragment)
    return (line_step(fragment), values) if "loss" in values else None


_EVAL_BEFORE = re.compile(r"(?<![A-Za-z0-9_])(?:val|valid|validation|validating|eval|evaluation|evaluating|"
                          r"test|testing|dev)(?![A-Za-z0-9_])", re.I)
"""A word that makes what follows it an evaluation's (`Validation loss:`, `[val] step 29 | loss nan`, `Iter 1: Val loss
nan`, fairseq's `| valid | epoch 002 | ... | loss 9.393`, `Evaluation - loss: 1.386`)."""


_EVAL_NAMED = re.compile(r"(?<![\w/.])(?:val|valid|validation|eval|evaluation|test|dev)[_/]loss" + _SEP_NUM, re.I)
"""An evaluation's loss under its one-word name (`val_loss=2.2`, `val_loss: 2.2`, `eval_loss = 2.2`, `eval/loss:
2.2`): `loss_line` reads no loss there (the `_` joins it to another word: `best_val_loss`, Keras' `val_loss`
beside its `loss`)."""


def named_evaluation_loss(fragment: str) -> float | None:
    """The value of an evaluation's loss named in one word (`_EVAL_NAMED`) on a line that has no training loss of its
    own (`loss_line` reads none), or None."""
    if len(fragment) > 2000 or "oss" not in fragment and "OSS" not in fragment:
        return None
    found = _EVAL_NAMED.search(fragment)
    return number(found.group(1)) if found else None


def evaluation_loss(fragment: str) -> bool:
    """Whether the loss `loss_line` reads in a line is an evaluation's: the loss's own name says so (`val loss`,
    `eval loss 2.31`), or an evaluation's word comes before it on the line and its name is not the training's
    (`[val] step 29 | loss nan`, `Validation: loss 2.3`; not `step 40: train loss 2.0, val loss 2.9`, whose first loss
    is the training's, nor Keras' `loss: 1.00 - val_loss: 0.96`)."""
    at = _loss_at(fragment)
    if at is None:
        return False
    start, key = at
    return not key.lower().replace("_", " ").startswith(("train", "loss train")) and \
        _EVAL_BEFORE.search(fragment, 0, start) is not None


def _loss_at(fragment: str) -> tuple[int, str] | None:
    """(where, key) of the name of the loss `_line_values` reads, or None."""
    for found in _PAIRS.finditer(fragment):
        key = found.group(1) or found.group(3)
        if _KEY_ALIASES.get(key.lower().replace("_", " ")) == "loss":
            return found.start(), key
    spaced = _SPACED.search(fragment)
    if spaced:
        return spaced.start(), spaced.group(1)
    for found in _BEFORE.finditer(fragment):
        if found.group(2).lower() == "loss":
            return found.start(), found.group(2)
    return None


def _line_values(fragment: str) -> dict[str, float]:
    """The named values of a line: `key: value` pairs first; then, for a loss still not found, a loss with only a
    space before its value (`loss 10.8259,`), then values named after the number (`11.8750 loss`)."""
    values: dict[str, float] = {}
    for key, raw, cn_key, cn_raw in _PAIRS.findall(fragment):
        _put(values, key or cn_key, raw if key else cn_raw)  # the English key's groups, else the Chinese
    lr = stated_learning_rate(fragment)
    if lr is not None:
        values["learning_rate"] = lr
    spaced = _SPACED.search(fragment) if "loss" not in values else None
    if spaced:
        values["loss"] = float(spaced.group(2))
    if "loss" not in values:
        for raw, key in _BEFORE.findall(fragment):
            _put(values, key, raw)
    return values


def _put(values: dict[str, float], key: str, raw: str) -> None:
    """The value under its key's one name (`avg_loss`, `Train Loss` are `loss`); the first of each name stands."""
    name = _KEY_ALIASES.get(key.lower().replace("_", " "))
    value = number(raw)
    if name and value is not None and name not in values:
        values[name] = value


_ADVERSARIAL = re.compile(r"(?<![\w/])(?:[DG]|[dg](?=_)|disc(?:riminator)?|gen(?:erator)?)[ _]loss\b|"
                          r"\bloss[ _]?[DG]\b", re.I)
"""A GAN's pair of losses (`[D loss: 0.6931] [G loss: 0.7015]`, `d_loss=`, `Loss_D:`): adversaries whose losses
trade places by design (a discriminator at ln 2 is at equilibrium), not a training loss to judge by its shape."""
_LISTED = re.compile(
    r"(?<![\w/])(?:train(?:ing)?[ _])?(?:loss(?:es)?|损失)(?:[ _](?:values?|history|curve|per epoch|by epoch|"
    r"over (?:the )?epochs))?\s*(?:[:=]|\b(?:are|were|is|was)\b)?\s*\[?\s*"
    rf"((?:{_NUMBER})(?:\s*[,;]?\s+|\s*[,;]\s*)(?:(?:{_NUMBER})(?:\s*[,;]?\s+|\s*[,;]\s*)){{2,}}(?:{_NUMBER}))"
    r"\s*\]?\s*[.]?\s*$", re.I)
"""The losses a person lists in one line (`Losses: 161.9 160.99 160.988 160.076`, `loss history: [0.9, 0.7, 1.3,
2.2]`): four or more numbers right after the loss's name, to the line's end."""


def loss_list(fragment: str) -> list[float]:
    """The losses of a listed series (see `_LISTED`), in order; empty when the line lists none."""
    found = _LISTED.search(fragment) if len(fragment) < 2000 and ("oss" in fragment or "损失" in fragment) else None
    if found is None:
        return []
    return [x for x in (number(t) for t in re.split(r"[\s,;]+", found.group(1)) if t) if x is not None]


_MEGATRON = re.compile(r"^\s*(?:\[[^\]]*\]\s*)*iteration\s+(\d+)\s*/\s*\d+\s*\|")
_MEGATRON_FIELD = re.compile(rf"\|\s*([A-Za-z][\w ()/-]*?)\s*:\s*({_NUMBER})\s*(?=\||$)")
UNPRINTED = "loss_unprinted"
"""The key a Megatron line without its loss is read with (the loss itself then reads nan)."""


def megatron_line(fragment: str) -> tuple[int | None, dict[str, float]] | None:
    """(step, values) of a Megatron-LM / Megatron-DeepSpeed `iteration 9/10 | ... | lm loss: 2.3E+00 | ...` line.

    Megatron's training_log prints a loss only when its average over the interval is above 0, so a line with no
    loss while `number of skipped iterations` is 0 had a NaN average (Megatron-DeepSpeed's NaN counter missed
    it, deepspeedai/Megatron-DeepSpeed#434): that loss reads nan, marked `loss_unprinted`."""
    head = _MEGATRON.match(fragment)
    if head is None:
        return None
    fields = {name.strip().lower(): number(raw) for name, raw in _MEGATRON_FIELD.findall(fragment + "|")}
    values = {"learning_rate": fields["learning rate"]} if fields.get("learning rate") is not None else {}
    if fields.get("grad norm") is not None:
        values["grad_norm"] = fields["grad norm"]  # type: ignore[assignment]
    losses = [v for k, v in fields.items() if k.endswith("loss") and v is not None]
    skipped, nans = fields.get("number of skipped iterations"), fields.get("number of nan iterations")
    if losses:
        values["loss"] = fields.get("lm loss") or losses[0]  # type: ignore[assignment]
    elif skipped == 0 or (nans or 0) > 0:
        values.update({"loss": math.nan, UNPRINTED: 1.0})
    else:
        return None  # every step of the interval skipped (fp16 overflow): the loss scale says the rest
    return int(head.group(1)), values


def line_step(fragment: str) -> int | None:
    """The step a printed line names (`step 3`, `Step 3/100`, `[3/100]`, a leading count), or None; a counter beside
    an epoch of a total as far as the line alone tells (`epochs.read_alone`: `Epoch [3/3], Step [12/30]` is step 72,
    `epoch 2/3 step 400/900` None, since it fits a run's counter and an epoch's)."""
    within = within_epoch(fragment)
    if within is not None:
        return epochs.read_alone(*within).step
    found = _STEP.search(fragment)
    if found:
        return int(found.group(1))
    found = _STEP_SLASH.search(fragment) or _BRACKET.search(fragment) or _ITER.search(fragment)
    if found:
        return int(found.group(1))
    leading = _LEADING.match(fragment)
    return int(leading.group(1)) if leading else None


_COUNTER = re.compile(r"(?<![\w/])(?:(?:global[ _])?step|iter(?:ation)?)?(?:\s*[=:]\s*|\s+|\s*\[\s*)?"
                      r"(\d{1,9})\s*/\s*(\d{1,9})\b", re.IGNORECASE)
_EPOCH_BEFORE = re.compile(r"epoch\s*[=:]?\s*\[?\s*$", re.IGNORECASE)


_EPOCH_OF = re.compile(r"(?<![\w/])epoch\s*[=:]?\s*\[?\s*(\d{1,6})\s*/\s*(\d{1,6})\s*\]?", re.IGNORECASE)
"""An epoch of a total (`Epoch [2/3]`, `epoch 2/3`): counted from 1, as a total implies."""


def within_epoch(fragment: str) -> tuple[int, int, int, int] | None:
    """(epoch, n, total, epochs) of a line whose step counter of a total follows an epoch of a total (`Epoch [2/3],
    Step [10/30]`, `epoch 2/3 iter 400/900`): the counter may count the epoch's batches or the run's steps
    (`epochs` tells them apart)."""
    epoch = _EPOCH_OF.search(fragment) if "poch" in fragment else None
    if epoch is None or not 0 < int(epoch.group(1)) <= int(epoch.group(2)):
        return None
    counter = _counter(fragment, epoch.end())
    return (int(epoch.group(1)), counter[0], counter[1], int(epoch.group(2))) if counter is not None else None


def _counter(fragment: str, start: int = 0) -> tuple[int, int] | None:
    """(n, total) of the first step counter named (`step 25/30`) or bracketed (`[25/30]`) from `start`, not an
    epoch's."""
    for found in _COUNTER.finditer(fragment, start):
        named = found.group(0).lstrip()[:1].isalpha()
        bracketed = fragment[:found.start(1)].rstrip().endswith("[")
        if (named or bracketed) and not _EPOCH_BEFORE.search(fragment[:found.start(1)]):
            n, total = int(found.group(1)), int(found.group(2))
            return (n, total) if 0 < n <= total else None
    return None


_EPOCH_SAID = re.compile(r"(?<![\w/])(?:epoch|ep)(?:\s*[=:]\s*|\s+|\s*\[\s*)(\d{1,6}(?:\.\d{1,6})?)"
                         r"(?:\s*/\s*(\d{1,6}))?(?![\w.]|\s*/)", re.IGNORECASE)


def line_epoch(fragment: str) -> float | None:
    """The epoch a loss line names, in the Trainer's meaning (epochs done, as its dict's `'epoch': 0.5`), or None:
    a fractional epoch as printed (`epoch 0.5`, `ep 0.50`, `epoch=1.0`); an epoch of a total (`Epoch 1/3`,
    `Epoch [2/3]`) counts from 1, so the epochs done before it (its step within the epoch is not on the line:
    `within_epoch` reads a counter that is). A bare whole epoch (`epoch 1`, mmdet's `Epoch [3][10800/12414]`) is not
    read: it may count from 0 or from 1, and the line does not say which (never guessed, as `epochs` does)."""
    found = _EPOCH_SAID.search(fragment) if "p" in fragment or "P" in fragment else None
    if found is None:
        return None
    value = float(found.group(1))
    if found.group(2) is None:
        return value if "." in found.group(1) and value < 1e6 else None
    total = int(found.group(2))
    return value - 1 if value == int(value) and 0 < value <= total else None


def line_total(fragment: str) -> int | None:
    """The total of a loss line's step counter (`step 25/30`, `Iter: 7/900`, `[25/30]`), or None; an epoch's
    (`epoch 2/3`, `Epoch [2/3]`) is no step total, and a bare `N/T` counts only in brackets (`[25/30]`); a counter
    beside an epoch of a total as far as the line alone tells (`Epoch [3/3], Step [12/30]`: 90)."""
    within = within_epoch(fragment)
    if within is not None:
        return epochs.read_alone(*within).total
    counted = _counter(fragment)
    return counted[1] if counted is not None else None


# -- `step value` columns ------------------------------------------------------------------------------------

_PAIR = re.compile(r"^\s*(\d{1,9})\s+([-+]?(?:\d+\.\d+|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|NaN|inf|Inf))\s*$")


def step_value(fragment: str) -> tuple[int, float] | None:
    """(step, value) of a bare two-column line, `76930 2.6496577` or `76980 nan` (a script printing its step and
    loss with no names); the value needs a decimal point (or nan/inf), so two counts are not read as one."""
    found = _PAIR.match(fragment) if len(fragment) < 80 else None
    return (int(found.group(1)), float(found.group(2))) if found else None
