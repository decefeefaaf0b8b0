"""Where a run was, from its progress bars (phase_text.py reads its status lines): a bar's description (`Validation
DataLoader 0: 45%|...`, `Saving ...`), a Keras bar at an epoch's end with validation on, a notebook's bar without an
epoch drawn after training's, a bar of another total inside training (the evaluation's loop), a training log that
brings the run back to its steps, and the bar drawn before a status moving on (the status's phase is over). The
methods of PhaseText (phase_text.py) that read bars; their state lives on PhaseText, pickled in events.idx. Pure
logic."""

from __future__ import annotations

import re

from loratui.logic.fmt import quoted
from loratui.logic.text_reader import progress, values

CHECKPOINT = re.compile(r"checkpoint-(\d{1,9})\b")

NOT_STATUS = re.compile(r"[{=]|\b(?:results?|metrics?|done|finished|complete[d]?|dataset|total|loss|settings?|config\w*|"
                         r"param\w*|arguments|args|options|"
                         r"(?:acc(?:uracy)?|f1|scores?|ppl|perplexity|bleu|rouge\w*|wer|cer|auc|precision|recall|mAP)"
                         r"\s*[:=]?\s*[-+]?\.?\d)|\b(?:eval|train|test|val|validation)/\w", re.I)
"""A status line that reports a phase over (its results, `Training completed`), its settings (`Evaluation settings:`)
or a dataset's save; a metric's path
(`wandb: eval/runtime 20.1`) is no status either."""

_COUNTS = re.compile(r"(?<![\d.])(\d{1,12})/(\d{1,12})\s*\[")

_BAR_TAIL = re.compile(r"\]\s*(?P<tail>[A-Za-z][^|\]]{2,200})$")

_EVAL_BAR = re.compile(r"^\W*(?:eval\w*|valid\w*|val\b|test\w*|predict\w*|inferenc\w*|sanity)|\bmAP(?:50|@|\b)", re.I)
"""A progress bar whose description opens with evaluation (`Valid (loss 53.34) epoch 1`, Lightning's
`Validation DataLoader 0`, `Sanity Checking DataLoader 0`, `Evaluating`, `Testing`) or names its metric (YOLO's
`Class  Images  Instances  Box(P  R  mAP50  mAP50-95)`)."""

_EVAL_WORD = re.compile(r"\b(?:val|valid|validation|validating|eval|evaluation|evaluating|test|testing)\b", re.I)
"""A bar's description that names evaluation anywhere (`Epoch 3 validation`), unless it names training too."""

_SAVE_BAR = re.compile(r"^\W*(?:\w+:\s*)?(?:sav(?:e|ing)|writ(?:e|ing)|merg(?:e|ing)|export\w*|upload\w*|push\w*)\b", re.I)
"""A bar whose description writes the model out (`Writing model shards`, `Unsloth: Saving model`); a dataset's own
save (`Saving the dataset (1/1 shards)`) is no model's."""

_NB_PROGRESS = re.compile(r"^\s*\[\s*\d{1,9}/\d{1,9}\s+[\d:]{4,12}(?:\s*<\s*[\d:]{4,12})?(?:,\s*[\d.]+\s*it/s)?"
                          r"(?P<epoch>,\s*Epoch\s+[\d.]+/\d+)?\s*\]")
"""transformers' notebook progress pasted as text: the training's shows its epoch (` [ 500/1000 10:00 < 10:00, 0.83
it/s, Epoch 0.50/1]`), the evaluation's does not (` [ 23/125 00:05 < 00:24]`)."""

_KERAS_BAR = re.compile(r"^\s*(\d{1,9})/(\d{1,9}) \[[=>.]+\] - ETA: 0s\b")
"""Keras' progress bar with all of an epoch's steps done but its closing line (`- 41s 21ms/step - ... - val_loss`)
not printed yet: what runs now is the epoch's end, its validation when the run validates."""

_LETTER = re.compile(r"[A-Za-z]")

_PLAIN_BAR = re.compile(r"\s*\d{1,3}%\s*\|[^|\n]{0,400}\|\s*\d{1,12}/(\d{1,12})\s*\[")

_DICT_LOSS = re.compile(r"""\{\s*['"]loss['"]\s*:|[,{]\s*['"]loss['"]\s*:""")

_NOT_TRAIN_LOSS = re.compile(r"\b(?:eval|valid|val|test)", re.I)


def _trains(line: str) -> bool:
    """Whether a line logs a training step's loss (a printed Trainer dict or a `step N ... loss X` line)."""
    if "{" in line:
        return _DICT_LOSS.search(line) is not None  # a step's dict (with tokens seen, train_runtime too); the summary has no 'loss'
    return values.loss_line(line) is not None and not _NOT_TRAIN_LOSS.search(line)


class PhaseBars:
    """PhaseText's reading of progress bars."""

    banner: str
    banner_line: str
    train_total: int
    _bar_total: int
    frozen: bool

    def _bar_status(self, line: str) -> bool:
        """A progress bar (Keras', a notebook's, tqdm's with or without a description) or a training step's log:
        the phase it shows. True when the line was one."""
        if "/" in line and "[" in line:
            self._bar_moved(line)
            keras = _KERAS_BAR.match(line) if "ETA: 0s" in line else None
            if keras and keras.group(1) == keras.group(2) and getattr(self, "_keras_validates", False):
                self._announce("eval", line)
                self._log_on_banner = True
                return True
            if "]" in line and self._notebook_bar(line):
                return True
        bar_at = line.find("|")
        if bar_at > 0 and "/" in line and _LETTER.search(line, 0, bar_at):  # a bar with a description
            bar = progress.find_bar(line)
            if bar is not None and bar.desc:
                if _EVAL_BAR.search(bar.desc) or _EVAL_WORD.search(bar.desc) and "train" not in bar.desc.lower():
                    self.banner, self.banner_line, self._banner_bar = "eval", quoted(line), None
                elif _SAVE_BAR.search(bar.desc) and not NOT_STATUS.search(bar.desc):
                    self.banner, self.banner_line, self._banner_bar = "save", quoted(line), None
                elif self.banner == "eval":
                    self.banner = ""
                self._after_bar(line)
                return True
        if bar_at > 0 and "%" in line:
            plain = _PLAIN_BAR.match(line)
            if plain:
                self._plain_bar(int(plain.group(1)), line)
                self._after_bar(line)
                return True
        if "oss" in line and _trains(line):
            self.banner = ""  # a training step's log: the run is back in training (the reader may hand the
            # Log event on only after the lines that follow it, so the line itself is read here); the bar drawn
            # meanwhile is the training loop's
            self.train_total = self._bar_total or self.train_total
            self._after_bar(line)
            return True
        return False

    def _notebook_bar(self, line: str) -> bool:
        """A notebook's progress: one without an epoch, drawn after the training's, is the evaluation's; the
        training's drawn again ends it. True when the line was one."""
        bar = _NB_PROGRESS.match(line)
        if bar is None:
            return False
        if bar.group("epoch"):
            self._notebook_training = True
            if self.banner == "eval":
                self.banner = ""
        elif getattr(self, "_notebook_training", False) and "<" in line:  # a finished bar (`[125/125 00:30]`) is over
            self.banner, self.banner_line, self._banner_bar = "eval", quoted(line), None
        return True

    def _bar_moved(self, line: str) -> None:
        """A progress counter: when the bar drawn before the last status moves (goes on past where it was, or counts
        again from the start of the next epoch), the status's phase is over (`Saving model checkpoint to ...` then
        ` 50%|█████ | 503/1000`: the save finished and training went on)."""
        counts = _COUNTS.search(line)
        if counts is None:
            return
        bar = (int(counts.group(1)), int(counts.group(2)))
        before = getattr(self, "_banner_bar", None)
        if self.banner in ("save", "eval") and before is not None and bar[1] == before[1] and bar[0] != before[0]:
            self.banner, self._banner_bar = "", None
        elif self.banner == "save" and "checkpoint-" in self.banner_line:
            saved = CHECKPOINT.search(self.banner_line)  # the save of step N is over once a bar counts past N
            if saved is not None and int(saved.group(1)) < bar[0] <= bar[1]:
                self.banner = ""
        self._last_bar = bar

    def _after_bar(self, line: str) -> None:
        """What a script printed after a bar on the same line (`... 1.87s/it, loss=0.296] SAVING CHECKPOINT...`)."""
        tail = _BAR_TAIL.search(line)
        if tail is not None:
            self._status(tail.group("tail"))

    def _plain_bar(self, total: int, line: str) -> None:
        """A bar with no description: once a training log named the training loop's bar by its total, a bar of
        another total drawn during training is a second loop inside it, the evaluation (the Trainer's eval
        bar, a custom loop's validation bar); the training bar drawn again ends it."""
        outer = getattr(self, "_plain_before", None)  # getattr: a state pickled in an older events.idx
        if not self.train_total and outer is not None and outer[0] < outer[1] and total < outer[1]:
            self.train_total = outer[1]  # a smaller loop drawn inside an unfinished one: that one is training's
        counts = _COUNTS.search(line)
        self._plain_before = (int(counts.group(1)), total) if counts else None
        self._bar_total = total
        if self.train_total and total != self.train_total:
            self.banner, self.banner_line, self._banner_bar = "eval", quoted(line), None
        elif self.banner == "eval" and total == self.train_total:
            self.banner = ""
