"""A loss that is not learning, read over the logs: zero (from the start, or a cliff), flat from the start (or across
epoch summaries), the same values coming back, a grad norm or a learning rate of 0, a loss at chance level (ln k), a
collapse (stuck high with its gradient gone), the first evaluations unmoved. The detectors of LossWatch (loss.py) that
judge it; their state lives on LossWatch, pickled with the advisor in events.idx. Pure logic."""

from __future__ import annotations

import math
from collections import deque

from loratui.logic import series
from loratui.logic.advisor.advice import Finding
from loratui.logic.advisor.watches import Context
from loratui.recipe import Recipe

ZERO = 1e-8
"""A printed loss of 0.0 or 0.0000: cross-entropy on real data is never exactly zero."""


class FlatWatch:
    """LossWatch's detectors of a loss that is not learning, and their thresholds."""

    FLAT_N = 30
    FLAT_MIN = 6
    """Logs (spanning 100 steps or more) from which a loss can be judged flat: a robust spread from fewer is noise."""
    EPOCHS_SPAN = 1000
    """Steps that three logs must span to be judged as epoch summaries (`_judge_summaries`)."""
    STILL_N = 5
    """Logs from the start that are judged as summaries whatever their steps span: five epochs' losses numbered by
    epoch (`Epoch 3/10, Loss: 3.4521`, Lightning's bar at each epoch's end) that stay within 0.5% do not learn."""
    ZERO_LR = 5
    """Logs in a row with a learning rate of exactly 0: more than a warm-up's first log or a schedule's last."""
    CHANCE_N = 4
    COLLAPSE_N, COLLAPSE_GRAD, COLLAPSE_SHARE, COLLAPSE_DRIFT = 12, 20.0, 2 / 3, 0.05
    """A collapse (`_collapse`): logs judged, the fall of the grad norm's median from the first logs', the share of
    ln(vocab) the loss still sits at, and the most its trend may move over those logs (share of its level)."""
    EVAL_N, EVAL_SPREAD, EVAL_EARLY = 4, 1e-3, 0.5
    STILL_SPREAD, STILL_GAP = 1e-4, 10
    """A training loss standing still anywhere in a run (`_stands_still`): the most three logs in a row may differ
    (share of their level), and the fewest steps between two of them."""

    recipe: Recipe | None
    first: list[tuple[int, float, float | None]]
    flat: list[tuple[int, float]]
    judged_flat: bool
    grads: list[float]
    lrs: list[float]
    recent: deque[float]
    prior: deque[tuple[int, float]]
    zero_streak: int
    zero_lr: int
    at_chance: list[tuple[int, float]]
    vocab: int
    tail: deque[tuple[int, float, float]]
    collapsed: bool
    lr: float | None
    warming: bool
    evals: list[tuple[int, float, float | None]]

    def _eval_still(self, step: int, loss: float, epoch: float | None) -> list[Finding]:
        """The first evaluations' loss unmoved: 4 or more, the first within half an epoch of the start, all within
        0.1% of their median, printed to 4 digits or more. An evaluation scores the same data every time, so it has
        no sampling noise: a model that learns moves it by more than that between evaluations (sentence-transformers
        #2982: eval_loss 2.8592, 2.8588, 2.8585, 2.8584 over an epoch at a learning rate too low for the model).
        Early only: at a schedule's end, with the learning rate near 0, a converged run's evaluations stand still."""
        if len(self.evals) >= self.EVAL_N or loss <= ZERO or _digits(loss) < 4:
            return []
        self.evals.append((step, loss, epoch))
        first = self.evals[0][2]
        if len(self.evals) < self.EVAL_N or first is None or first > self.EVAL_EARLY:
            return []
        losses = [v for _, v, _ in self.evals]
        level = series.median(losses)
        if max(losses) - min(losses) > self.EVAL_SPREAD * level:
            return []
        return [Finding("loss_flat", step, {"kind": "eval_unchanged", "mean": level, "spread": max(losses) - min(losses),
                                            "n": len(losses), "from_epoch": first, "lr": self.lr})]

    def _zero(self, step: int, loss: float, epoch: float | None) -> list[Finding]:
        """A loss of exactly zero: from the first logs, or a fall from a real loss (a cliff, not a descent)."""
        before = self.prior[-2][1] if len(self.prior) >= 2 else None
        if abs(loss) > ZERO:  # a negative loss (an NLL of densities, a reward-weighted objective) is no zero
            self.zero_streak = 0
            return []
        self.zero_streak += 1
        if before is not None and before >= 0.05:
            return [Finding("loss_zero", step, {"kind": "cliff", "before": before, "before_step": self.prior[-2][0]})]
        if self.zero_streak == 2 and len(self.first) <= 2:
            return [Finding("loss_zero", step, {"kind": "start", "from_step": self.first[0][0] if self.first
                                                else step, "epoch": epoch})]
        return []

    def lone_zero(self) -> Finding | None:
        """A pasted text's only training log with a loss of exactly 0 (`I got training loss=0.00`, one printed
        dict): cross-entropy on real data is never 0, so one such log is the report. A live run waits for a second
        (`_zero`): its next log may show a real loss."""
        if len(self.first) != 1 or abs(self.first[0][1]) > ZERO:
            return None
        step, _, epoch = self.first[0]
        return Finding("loss_zero", step, {"kind": "lone", "from_step": step, "epoch": epoch})

    def _flat(self, ctx: Context, step: int, loss: float, grad: float | None, epoch: float | None) -> list[Finding]:
        found = []
        if len(self.first) < 5:
            self.first.append((step, loss, epoch))
            losses = [v for _, v, _ in self.first]
            if len(self.first) == 5 and max(losses) < 0.1 and min(losses) > ZERO and _at_start(self.first):
                found.append(Finding("loss_flat", step, {"kind": "low", "losses": losses}))
        if self.lr is not None and len(self.lrs) < 10:
            self.lrs.append(self.lr)
        self.zero_lr = self.zero_lr + 1 if self.lr == 0.0 else 0
        if self.zero_lr == self.ZERO_LR:
            found.append(Finding("loss_flat", step, {"kind": "zero_lr", "n": self.zero_lr}))
        if grad is not None and len(self.grads) < 10:
            self.grads.append(grad)
            zeros = sum(1 for g in self.grads if g == 0.0)
            if (len(self.grads) == 3 and zeros == 3) or (len(self.grads) == 10 and 5 <= zeros < 10 and
                                                          self.grads[:3].count(0.0) < 3):
                lr_zero = bool(self.lrs) and all(x == 0.0 for x in self.lrs)
                found.append(Finding("loss_flat", step, {"kind": "zero_grad", "zeros": zeros, "n": len(self.grads),
                                                         "lr_zero": lr_zero}))
        found += self._repeats(step, loss) + self._stands_still(step)
        if len(self.flat) < self.FLAT_N and step > _warmup_steps(self.recipe, ctx.max_steps) and not self.warming \
                and self.lr != 0.0 and _at_start(self.first):
            self.flat.append((step, loss))
            span = self.flat[-1][0] - self.flat[0][0]
            if len(self.flat) == self.FLAT_N or (len(self.flat) >= self.FLAT_MIN and span >= 100 and not self.judged_flat):
                found += self._judge_flat(step)
            elif (len(self.flat) == 3 and span >= self.EPOCHS_SPAN) or len(self.flat) == self.STILL_N:
                found += self._judge_summaries(step)
        return found

    def _stands_still(self, step: int) -> list[Finding]:
        """Three training logs in a row, each STILL_GAP steps or more after the last, printed finely enough to tell,
        within 0.01 % of each other, anywhere in the run: a training loss is a mean over different batches,
        which a model that reads its input scores differently by far more than that, so its output no longer depends
        on its input (PaddleNLP#2236: `loss:1535.619873`, `1535.619629`, `1535.633667`, 50 steps apart, from a learning
        rate too high). Not a converged run's: its batches still differ. Not a running average over a long epoch
        (a bar's postfix moves by 1/n a batch): those come one step apart."""
        last = list(self.prior)[-3:]
        if len(last) < 3 or any(b[0] - a[0] < self.STILL_GAP for a, b in zip(last, last[1:])):
            return []
        losses = [v for _, v in last]
        level = series.median(losses)
        # printed finely enough to tell: the last digit a tenth of the spread allowed, or less
        if level <= ZERO or max(10.0 ** -_decimals(v) for v in losses) > 0.1 * self.STILL_SPREAD * level or \
                max(losses) - min(losses) > self.STILL_SPREAD * level:
            return []
        return [Finding("loss_flat", step, {
            "kind": "still", "mean": level, "spread": max(losses) - min(losses),
            "from_step": last[0][0], "to_step": last[-1][0], "n": len(losses), "lr": self.lr})]

    def _judge_summaries(self, step: int) -> list[Finding]:
        """Three logs from the run's start, thousands of steps apart (epoch summaries), or five whatever their steps
        (numbered by epoch), within 0.5% of each other,
        printed to 3 digits or more so that 0.5% shows: a loss averaged over whole epochs that does not move at all
        in the first epochs is not learning (maxjcohen/transformer#27: `loss=80.6`, `80.5`, `80.5`, 10000 steps
        apart). Early epochs of a learning run fall by more than that."""
        losses = [v for _, v in self.flat]
        level = series.median(losses)
        if level <= ZERO or min(_digits(v) for v in losses) < 3:
            return []
        if max(losses) - min(losses) > 0.005 * level:
            return []
        return [Finding("loss_flat", step, {
            "kind": "unchanged", "mean": level, "spread": max(losses) - min(losses),
            "from_step": self.flat[0][0], "to_step": self.flat[-1][0], "n": len(losses)})]

    def _repeats(self, step: int, loss: float) -> list[Finding]:
        """Losses printed to 4+ digits that come back exactly: the weights are not changing."""
        if loss <= ZERO or _digits(loss) < 4:
            return []
        self.recent.append(loss)
        n = len(self.recent)
        repeats = n - len(set(self.recent))
        if n >= 8 and repeats >= max(4, n / 3):
            distinct = len(set(self.recent))
            return [Finding("loss_flat", step, {"kind": "repeat", "n": n, "repeats": repeats, "distinct": distinct,
                                                "value": max(set(self.recent), key=list(self.recent).count),
                                                "lr": self.lr})]
        return []

    def _judge_flat(self, step: int) -> list[Finding]:
        """Flat from the start: no trend (Theil-Sen change under 2% of the level, and no Mann-Kendall trend: a
        slow steady descent is learning), little scatter (robust spread under 1.5%), and no descent before it
        (the run's first loss is not above the level)."""
        self.judged_flat = True
        losses = [v for _, v in self.flat]
        level = series.median(losses)
        start, end = series.theil_sen(losses)
        scatter = 1.4826 * series.median([abs(v - level) for v in losses])
        first = self.first[0][1] if self.first else losses[0]
        if level > ZERO and abs(end - start) <= 0.02 * level and scatter <= 0.015 * level and \
                first <= 1.05 * level and abs(series.mann_kendall(losses)) < 1.64:
            return [Finding("loss_flat", step, {
                "kind": "unchanged", "mean": level, "spread": max(losses) - min(losses),
                "from_step": self.flat[0][0], "to_step": self.flat[-1][0], "n": len(losses)})]
        return []

    def _chance(self, step: int, loss: float) -> list[Finding]:
        """The loss sitting at ln k, the cross-entropy of a uniform guess over k classes (ln 2 = 0.6931 for a
        binary task, ln 4 = 1.3863 over four answers), for 4 logs in a row to 3 decimals or more: the model
        outputs chance and learns nothing. k up to 100, where neighbouring ln k still lie 1% apart."""
        # While the learning rate warms up a fresh head may still sit at chance: that is where it starts.
        k = round(math.exp(loss)) if 0.6 < loss < 4.7 and not self.warming else 0
        # Off by at most half the last printed digit (1.386 stands for ln 4 = 1.38629; 0.6930, read back as 0.693,
        # for ln 2), or 0.05% when printed long: a stuck output scatters in its 4th digit (0.6930-0.6934).
        tolerance = max(5e-4 * math.log(k), 0.5 * 10 ** -_decimals(loss)) if k >= 2 else 0.0
        near = k >= 2 and _decimals(loss) >= 3 and abs(loss - math.log(k)) <= tolerance
        same = bool(self.at_chance) and round(math.exp(self.at_chance[-1][1])) == k
        self.at_chance = (self.at_chance if same else []) + [(step, loss)] if near else []
        if len(self.at_chance) != self.CHANCE_N:
            return []
        return [Finding("loss_flat", step, {"kind": "chance", "k": k, "value": loss, "from_step": self.at_chance[0][0],
                                            "n": self.CHANCE_N, "lr": self.lr})]

    def _collapse(self, step: int, loss: float, grad: float | None) -> list[Finding]:
        """A loss that fell a little and stuck far above what training reaches, with the gradient gone: over the
        last `COLLAPSE_N` logs the grad norm's median is 20x below the first 3 logs' and the loss's Theil-Sen
        trend moves under 5% while it sits above 2/3 of ln(vocab) (a uniform guess over the vocabulary). The
        updates threw the model into a flat region where its outputs barely depend on the input: a learning
        rate far too high (tiny recipe at 0.9: 6.57 -> 5.45, grad_norm 2.6 -> 0.04, while at 3e-3 the loss falls
        to 3.4 with grad_norm ~1). Only where the vocabulary is known: a live run's model config."""
        if not self.vocab or self.collapsed or grad is None or not math.isfinite(grad):
            return []
        self.tail.append((step, loss, grad))
        early = [g for g in self.grads[:3] if math.isfinite(g)]
        if len(early) < 3 or len(self.tail) < self.COLLAPSE_N or self.tail[0][0] <= self.first[2][0]:
            return []
        losses, grads = [v for _, v, _ in self.tail], [g for _, _, g in self.tail]
        level, grad_now, grad_before = series.median(losses), series.median(grads), series.median(early)
        start, end = series.theil_sen(losses)
        if self.warming or level < self.COLLAPSE_SHARE * math.log(self.vocab) or self.first[0][1] <= level or \
                grad_now * self.COLLAPSE_GRAD > grad_before or abs(end - start) > self.COLLAPSE_DRIFT * level:
            return []
        self.collapsed = True
        return [Finding("loss_flat", step, {
            "kind": "collapse", "value": level, "first": self.first[0][1], "vocab": self.vocab,
            "from_step": self.tail[0][0], "n": len(losses), "grad": grad_now, "grad_before": grad_before,
            "lr": self.lr})]


def _at_start(first: list[tuple[int, float, float | None]]) -> bool:
    """Whether the first logs are the run's first (epoch near 0 when the logs say)."""
    epoch = first[0][2]
    return epoch is None or epoch < 0.1


def _digits(value: float) -> int:
    """Significant digits of a loss as printed (10.375 -> 5, 2.6 -> 2)."""
    text = repr(abs(value)).split("e")[0].replace(".", "").lstrip("0")
    return len(text.rstrip("0")) if "." in repr(value) else len(text)


def _decimals(value: float) -> int:
    """Decimal places of a loss as printed (1.386 -> 3, 0.69314 -> 5)."""
    text = repr(abs(value))
    return len(text.split(".")[1]) if "." in text and "e" not in text else 0


def _warmup_steps(recipe: Recipe | None, max_steps: int) -> int:
    """Steps of learning-rate warmup, when the recipe and the run's length say."""
    if recipe is None:
        return 0
    t = recipe.training
    return t.warmup_steps or int(t.warmup_ratio * max(max_steps, t.max_steps, 0))
