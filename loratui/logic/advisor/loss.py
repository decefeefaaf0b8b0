"""The loss detectors: NaN/inf, a loss that collapses to zero, stays flat or repeats, and one that climbs
or explodes. Bounded state, one `log` call per Trainer log; findings carry the numbers they saw."""

from __future__ import annotations

from collections import deque

from loratui import events
from loratui.logic import series
from loratui.logic.advisor.advice import Finding
from loratui.logic.advisor.watches import Context
from loratui.recipe import Recipe

ZERO = 1e-8
"""A printed loss of 0.0 or 0.0000: cross-entropy on real data is never exactly zero."""


class LossWatch:
    """NaN/inf, zero, flat or repeating losses, and a loss rising or jumping well above its best."""

    FLAT_N, ROLL, RISE, RISE_ABS, PATIENCE = 30, 10, 1.5, 0.25, 10
    SPIKE, SPIKE_ERROR = 5.0, 10.0

    def __init__(self, recipe: Recipe | None) -> None:
        self.recipe = recipe
        self.first: list[tuple[int, float, float | None]] = []  # (step, loss, epoch) of the first logs
        self.flat: list[tuple[int, float]] = []
        self.grads: list[float] = []  # the first grad norms
        self.lrs: list[float] = []  # the first learning rates
        self.bad_grad_streak = 0
        self.roll: deque[float] = deque(maxlen=self.ROLL)
        self.recent: deque[float] = deque(maxlen=40)  # finite losses, for repeats
        self.prior: deque[tuple[int, float]] = deque(maxlen=10)  # finite losses before this one, for spikes
        self.best: float | None = None
        self.best_step = 0
        self.rise_streak = 0
        self.short: deque[float] = deque(maxlen=3)
        self.short_best: tuple[float, int] | None = None
        self.short_streak = 0
        self.zero_streak = 0
        self.lr: float | None = None

    def log(self, ctx: Context, e: events.Log) -> list[Finding]:
        """Fold one Trainer log in; findings it completes."""
        values = {k: events.num_in(v) for k, v in e.values.items()}
        if "train_runtime" in values or "train_loss" in values or any(k.startswith("eval_") for k in values):
            return []  # the end-of-training summary or an eval, not a step's loss
        if values.get("learning_rate") is not None:
            self.lr = values["learning_rate"]
        loss = series.logged_loss(values)
        if values.get("loss") == 0.0 and loss != loss:
            values = dict(values, loss=loss, filtered=0.0)  # a NaN step logged as 0.0: a NaN, not a zero
        spike = self._spike(e.step, loss, values.get("grad_norm")) if loss is not None and _finite(loss) else None
        found = [spike] if spike else []
        found += self._nan(e.step, values, sorted(set(ctx.gpu_names.values())), bool(spike))
        if loss is None or not _finite(loss):
            return found
        found += self._zero(e.step, loss, values.get("epoch"))
        found += self._flat(ctx, e.step, loss, values.get("grad_norm"), values.get("epoch"))
        rise = self._rise(e.step, loss) or self._rise_short(e.step, loss)
        return found + ([rise] if rise and not spike else [])

    def _nan(self, step: int, values: dict[str, float | None], names: list[str], spike: bool) -> list[Finding]:
        loss, grad = values.get("loss"), values.get("grad_norm")
        if loss is not None and not _finite(loss):
            facts = {"what": "loss", "value": str(loss), "lr": self.lr, "names": names}
            if "filtered" in values:
                facts["filtered"] = str(grad)
            return [Finding("nan_loss", step, facts)]
        if grad is None:
            return []
        self.bad_grad_streak = 0 if _finite(grad) else self.bad_grad_streak + 1
        # fp16's grad scaler skips steps with inf gradients on purpose: only a streak means trouble there.
        fp16 = self.recipe is not None and self.recipe.training.fp16
        if self.bad_grad_streak >= (3 if fp16 else 1) and not spike:
            return [Finding("nan_loss", step, {"what": "grad_norm", "value": str(grad), "lr": self.lr,
                                               "streak": self.bad_grad_streak, "names": names, "loss": loss})]
        return []

    def _spike(self, step: int, loss: float, grad: float | None) -> Finding | None:
        """One log far above every recent one: 5x their median and twice their largest."""
        prior = [v for _, v in self.prior]
        self.prior.append((step, loss))
        if not prior:
            return None
        median = sorted(prior)[len(prior) // 2]
        if loss >= self.SPIKE * max(median, 1e-3) and loss >= 2 * max(prior) and loss - median >= 0.5:
            return Finding("loss_diverging", step, {
                "kind": "spike", "before": median, "now": loss, "lr": self.lr, "grad": grad,
                "error": loss >= self.SPIKE_ERROR * max(median, 1e-3), "prior_step": self.prior[-2][0]})
        return None

    def _zero(self, step: int, loss: float, epoch: float | None) -> list[Finding]:
        """A loss of exactly zero: from the first logs, or a fall from a real loss (a cliff, not a descent)."""
        before = self.prior[-2][1] if len(self.prior) >= 2 else None
        if loss > ZERO:
            self.zero_streak = 0
            return []
        self.zero_streak += 1
        if before is not None and before >= 0.05:
            return [Finding("loss_zero", step, {"kind": "cliff", "before": before, "before_step": self.prior[-2][0]})]
        if self.zero_streak == 2 and len(self.first) <= 2:
            return [Finding("loss_zero", step, {"kind": "start", "from_step": self.first[0][0] if self.first
                                                else step, "epoch": epoch})]
        return []

    def _flat(self, ctx: Context, step: int, loss: float, grad: float | None, epoch: float | None) -> list[Finding]:
        found = []
        if len(self.first) < 5:
            self.first.append((step, loss, epoch))
            losses = [v for _, v, _ in self.first]
            if len(self.first) == 5 and max(losses) < 0.1 and min(losses) > ZERO and _at_start(self.first):
                found.append(Finding("loss_flat", step, {"kind": "low", "losses": losses}))
        if self.lr is not None and len(self.lrs) < 10:
            self.lrs.append(self.lr)
        if grad is not None and len(self.grads) < 10:
            self.grads.append(grad)
            zeros = sum(1 for g in self.grads if g == 0.0)
            if (len(self.grads) == 3 and zeros == 3) or (len(self.grads) == 10 and 5 <= zeros < 10 and
                                                          self.grads[:3].count(0.0) < 3):
                lr_zero = bool(self.lrs) and all(x == 0.0 for x in self.lrs)
                found.append(Finding("loss_flat", step, {"kind": "zero_grad", "zeros": zeros, "n": len(self.grads),
                                                         "lr_zero": lr_zero}))
        found += self._repeats(step, loss)
        if len(self.flat) < self.FLAT_N and step > _warmup_steps(self.recipe, ctx.max_steps) and self.lr:
            self.flat.append((step, loss))
            if len(self.flat) == self.FLAT_N:
                found += self._judge_flat(step)
        return found

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
        losses = [v for _, v in self.flat]
        mean = sum(losses) / len(losses)
        spread = max(losses) - min(losses)
        if mean > 0 and spread <= 0.02 * mean:
            return [Finding("loss_flat", step, {
                "kind": "unchanged", "mean": mean, "spread": spread,
                "from_step": self.flat[0][0], "to_step": self.flat[-1][0]})]
        return []

    def _rise(self, step: int, loss: float) -> Finding | None:
        self.roll.append(loss)
        if len(self.roll) < self.ROLL:
            return None
        mean = sum(self.roll) / len(self.roll)
        if self.best is None or mean < self.best:
            self.best, self.best_step = mean, step
        rising = mean > self.RISE * self.best and mean - self.best >= self.RISE_ABS
        self.rise_streak = self.rise_streak + 1 if rising else 0
        if self.rise_streak == self.PATIENCE:
            return Finding("loss_diverging", step, {
                "kind": "rise", "best": self.best, "best_step": self.best_step, "now": mean, "lr": self.lr})
        return None

    def _rise_short(self, step: int, loss: float) -> Finding | None:
        """A short log: the mean of 3 logs at 1.5x its best for two logs in a row, after it had fallen."""
        self.short.append(loss)
        if len(self.short) < 3:
            return None
        mean = sum(self.short) / 3
        if self.short_best is None or mean < self.short_best[0]:
            self.short_best = (mean, step)
        best, best_step = self.short_best
        fell = best_step > 0 and self.first and self.first[0][1] > 1.2 * best
        rising = fell and mean > self.RISE * best and mean - best >= self.RISE_ABS
        self.short_streak = self.short_streak + 1 if rising else 0
        if self.short_streak == 2:
            return Finding("loss_diverging", step, {
                "kind": "rise", "best": best, "best_step": best_step, "now": mean, "lr": self.lr, "window": 3})
        return None


def _at_start(first: list[tuple[int, float, float | None]]) -> bool:
    """Whether the first logs are the run's first (epoch near 0 when the logs say)."""
    epoch = first[0][2]
    return epoch is None or epoch < 0.1


def _digits(value: float) -> int:
    """Significant digits of a loss as printed (10.375 -> 5, 2.6 -> 2)."""
    text = repr(abs(value)).split("e")[0].replace(".", "").lstrip("0")
    return len(text.rstrip("0")) if "." in repr(value) else len(text)


def _finite(value: float) -> bool:
    return value == value and abs(value) != float("inf")


def _warmup_steps(recipe: Recipe | None, max_steps: int) -> int:
    """Steps of learning-rate warmup, when the recipe and the run's length say."""
    if recipe is None:
        return 0
    t = recipe.training
    return t.warmup_steps or int(t.warmup_ratio * max(max_steps, t.max_steps, 0))
