"""The loss detectors: NaN/inf, a loss that collapses to zero, stays flat or repeats, and one that climbs
or explodes (the slower rises in loss_rise.py). Bounded state, one `log` call per Trainer log; findings carry the
numbers they saw."""

from __future__ import annotations

import math
from collections import deque

from loratui import events
from loratui.logic import series
from loratui.logic.advisor.advice import Finding
from loratui.logic.advisor.loss_rise import RiseWatch
from loratui.logic.advisor.watches import Context
from loratui.logic.text_reader.values import UNPRINTED
from loratui.recipe import Recipe

ZERO = 1e-8
"""A printed loss of 0.0 or 0.0000: cross-entropy on real data is never exactly zero."""


class LossWatch(RiseWatch):
    """NaN/inf, zero, flat or repeating losses, a loss rising or jumping well above its best, and the metrics
    of objectives that are not language-model losses (preference and RL trainers)."""

    FLAT_N, WINDOW = 30, 64
    FLAT_MIN = 6
    """Logs (spanning 100 steps or more) from which a loss can be judged flat: a robust spread from fewer is noise."""
    EPOCHS_SPAN = 1000
    """Steps that three logs must span to be judged as epoch summaries (`_judge_summaries`)."""
    SPIKE, SPIKE_ERROR = 5.0, 10.0
    ZERO_LR = 5
    """Logs in a row with a learning rate of exactly 0: more than a warm-up's first log or a schedule's last."""
    CHANCE_N = 4
    COLLAPSE_N, COLLAPSE_GRAD, COLLAPSE_SHARE, COLLAPSE_DRIFT = 12, 20.0, 2 / 3, 0.05
    """A collapse (`_collapse`): logs judged, the fall of the grad norm's median from the first logs', the share of
    ln(vocab) the loss still sits at, and the most its trend may move over those logs (share of its level)."""
    HUGE_LOSS, HUGE_GRAD = 1e8, 1e6

    def __init__(self, recipe: Recipe | None) -> None:
        self.recipe = recipe
        self.first: list[tuple[int, float, float | None]] = []  # (step, loss, epoch) of the first logs
        self.flat: list[tuple[int, float]] = []  # the first logs after warm-up, for flat-from-the-start
        self.judged_flat = False
        self.grads: list[float] = []  # the first grad norms
        self.lrs: list[float] = []  # the first learning rates
        self.bad_grad_streak = 0
        self.grad_seen = False  # a finite grad norm was logged
        self.start_nan: Finding | None = None  # a grad-norm NaN before any finite one, maybe the scaler's start
        self.withdrawn: Finding | None = None  # the start NaN withdrawn, once the grads came back finite
        self.window: deque[tuple[int, float]] = deque(maxlen=self.WINDOW)  # recent finite losses
        self.sigma = 0.0  # the window's point-to-point noise
        self.recent: deque[float] = deque(maxlen=40)  # finite losses, for repeats
        self.prior: deque[tuple[int, float]] = deque(maxlen=10)  # finite losses before this one, for spikes
        self.recent_grads: deque[float] = deque(maxlen=16)  # finite grad norms before this one
        self.creep: tuple[int, float, float, list[float]] | None = None  # (step, level before, grad, losses after)
        self.creep_noise = 0.0  # the loss noise before that grad-norm spike
        self.block: list[float] = []  # the logs of the block being filled, for slow climbs
        self.best_block: tuple[float, int, float] | None = None  # (median, step, noise) of the lowest block
        self.blocks: list[float] = []  # block medians since the lowest, the last 8
        self.zero_streak = 0
        self.zero_lr = 0  # logs in a row with the learning rate at exactly 0
        self.at_chance: list[tuple[int, float]] = []  # the last logs in a row at ln k, for chance-level losses
        self.vocab = 0  # the model's vocabulary size, from the pre-flight estimate's config (0: unknown)
        self.tail: deque[tuple[int, float, float]] = deque(maxlen=self.COLLAPSE_N)  # (step, loss, grad) lately
        self.collapsed = False  # a collapse was found (said once)
        self.scored = False  # a finite training loss above zero was logged
        self.lr: float | None = None
        self.warming = False  # the logged learning rate is still rising
        self.objective = ""  # "" (a language-model loss), "preference" (DPO/ORPO/KTO...) or "rl" (GRPO/PPO...)
        self.signal: list[tuple[int, bool]] = []  # an objective's own health, one flag a log
        self.rose: Finding | None = None  # the rise found, escalated if NaN follows
        self.changed = False  # a finding already handed out changed (the advisor rebuilds its items)
        self.evals: list[tuple[int, float, float | None]] = []  # (step, eval loss, epoch) of the first evaluations
        self.epoch_loss: tuple[float, float, int] | None = None  # (epoch, loss, step) of the last whole-epoch log

    def log(self, ctx: Context, e: events.Log) -> list[Finding]:
        """Fold one Trainer log in; findings it completes."""
        self.changed = False
        values = {k: events.num_in(v) for k, v in e.values.items()}
        if "train_runtime" in values or "train_loss" in values or any(k.startswith("eval_") for k in values):
            return self._eval_nan(e.step, values, ctx)  # the end-of-training summary or an eval, not a step's loss
        lr = values.get("learning_rate")
        if lr is not None:
            self.warming = self.lr is not None and lr > self.lr * (1 + 1e-9) and lr > 0
            self.lr = lr
        loss = series.logged_loss(values)
        if values.get("loss") == 0.0 and loss != loss:
            values = dict(values, loss=loss, filtered=0.0)  # a NaN step logged as 0.0: a NaN, not a zero
        self.objective = self.objective or _objective(values)
        if self.objective:
            return self._nan(e.step, values, sorted(set(ctx.gpu_names.values())), False) + \
                self._own_metrics(e.step, values)
        spike = self._spike(e.step, loss, values.get("grad_norm")) if loss is not None and math.isfinite(loss) \
            else None
        spike = spike or self._huge(e.step, loss, values.get("grad_norm"))
        found = [spike] if spike else []
        nan = self._nan(e.step, values, sorted(set(ctx.gpu_names.values())), bool(spike))
        found += self._after_rise(e.step, nan) if nan and self._rise_stands() else nan
        if loss is None or not math.isfinite(loss):
            return found
        self.scored = self.scored or abs(loss) > ZERO
        found += self._zero(e.step, loss, values.get("epoch"))
        found += self._flat(ctx, e.step, loss, values.get("grad_norm"), values.get("epoch"))
        found += self._chance(e.step, loss)
        found += self._collapse(e.step, loss, values.get("grad_norm"))
        rise = self._epoch_jump(e.step, loss, values.get("epoch")) or self._rise(e.step, loss) or \
            self._slow_rise(e.step, loss) or \
            self._creep(e.step, loss, values.get("grad_norm")) or self._step_up(e.step) or self._level_up(e.step) or \
            self._short_rise(e.step) or self._climb_back(e.step)
        if rise is not None and not spike:
            self.rose = self.rose or rise  # the first is the one the advisor keeps
            found.append(rise)
        return found

    def _nan(self, step: int, values: dict[str, float | None], names: list[str], spike: bool) -> list[Finding]:
        loss, grad = values.get("loss"), values.get("grad_norm")
        if loss is not None and not math.isfinite(loss):
            facts = {"what": "loss", "value": str(loss), "lr": self.lr, "names": names}
            if "filtered" in values:
                facts["filtered"] = str(grad)
            if values.get(UNPRINTED):
                facts["why"] = ("Megatron printed no loss with no skipped iterations: it prints a loss only when "
                                  "its average is above 0, so the average was NaN")
            found = Finding("nan_loss", step, facts)
            if "filtered" in facts and not self.grad_seen and not self.scored:
                # the run's first logs: fp16's loss scaler skips the steps it overflows (no update), so a 0.0
                # beside grad_norm nan there is withdrawn when the next logs train with finite numbers
                self.start_nan = found
            return [found]
        if grad is None:
            return []
        self.bad_grad_streak = 0 if math.isfinite(grad) else self.bad_grad_streak + 1
        if math.isfinite(grad):
            self._scaler_start(loss)
            return []
        # fp16's grad scaler skips steps with inf gradients on purpose: only a streak means trouble there.
        fp16 = self.recipe is not None and self.recipe.training.fp16
        if self.bad_grad_streak >= (3 if fp16 else 1) and not spike:
            found = Finding("nan_loss", step, {"what": "grad_norm", "value": str(grad), "lr": self.lr,
                                               "streak": self.bad_grad_streak, "names": names, "loss": loss})
            if not self.grad_seen and loss is not None and math.isfinite(loss) and self.bad_grad_streak <= 3:
                self.start_nan = found  # maybe the scaler's first overflows: withdrawn if the next grads are finite
            return [found]
        return []

    def _scaler_start(self, loss: float | None) -> None:
        """A finite grad norm. Mixed precision's loss scaler starts high (2^16) and skips the first steps whose
        gradients overflow, so a run's first logs may show grad_norm nan or inf beside a finite loss and then
        train normally: a NaN at the start that the next logs recover from, with the loss finite throughout, is
        withdrawn (TableMASTER-mmocr#32: `grad_norm: nan`, then 3.98 while the loss fell 1.91 -> 0.92)."""
        self.grad_seen = True
        if self.start_nan is not None and loss is not None and math.isfinite(loss):
            self.start_nan.facts["withdrawn"] = True
            self.withdrawn, self.changed = self.start_nan, True
        self.start_nan = None

    def _eval_nan(self, step: int, values: dict[str, float | None], ctx: Context) -> list[Finding]:
        """An evaluation's loss that is not finite (fp16 overflowing in eval, a batch with no labels): a NaN
        the training logs may never show."""
        loss = values.get("eval_loss")
        if loss is None:
            return []
        if math.isfinite(loss):
            return self._eval_still(step, loss, values.get("epoch"))
        if self.zero_streak and not self.scored:
            # A training loss of exactly 0 from the first log and a NaN eval loss say one thing: no label token
            # is scored (a mean over none is 0/0 in eval). The zero is the finding, not a NaN to chase.
            return []
        return [Finding("nan_loss", step, {"what": "eval_loss", "value": str(loss), "lr": self.lr,
                                           "names": sorted(set(ctx.gpu_names.values()))})]

    EVAL_N, EVAL_SPREAD, EVAL_EARLY = 4, 1e-3, 0.5

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

    def _spike(self, step: int, loss: float, grad: float | None) -> Finding | None:
        """One log far above every recent one: 5x their median and twice their largest."""
        prior = [v for _, v in self.prior]
        self.prior.append((step, loss))
        if not prior:
            return None
        median = series.median(prior)
        if loss >= self.SPIKE * max(median, 1e-3) and loss >= 2 * max(prior) and loss - median >= 0.5:
            return Finding("loss_diverging", step, {
                "kind": "spike", "before": median, "now": loss, "lr": self.lr, "grad": grad,
                "error": loss >= self.SPIKE_ERROR * max(median, 1e-3), "prior_step": self.prior[-2][0]})
        return None

    def _huge(self, step: int, loss: float | None, grad: float | None) -> Finding | None:
        """A finite loss of 1e8 or more, or a gradient norm of 1e6 or more, in any log, even the first: no loss on
        real data is that large and healthy gradient norms sit between 0.01 and a few hundred; the updates blew up
        (mmdetection#4383: loss 2.46e9, grad_norm 1.17e12 with an 8-GPU learning rate on one GPU)."""
        big_loss = loss is not None and math.isfinite(loss) and abs(loss) >= self.HUGE_LOSS
        big_grad = grad is not None and math.isfinite(grad) and grad >= self.HUGE_GRAD
        if not (big_loss or big_grad):
            return None
        return Finding("loss_diverging", step, {"kind": "huge", "now": loss, "grad": grad, "lr": self.lr,
                                                "error": True})

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
        found += self._repeats(step, loss)
        if len(self.flat) < self.FLAT_N and step > _warmup_steps(self.recipe, ctx.max_steps) and not self.warming \
                and self.lr != 0.0 and _at_start(self.first):
            self.flat.append((step, loss))
            span = self.flat[-1][0] - self.flat[0][0]
            if len(self.flat) == self.FLAT_N or (len(self.flat) >= self.FLAT_MIN and span >= 100 and not self.judged_flat):
                found += self._judge_flat(step)
            elif len(self.flat) == 3 and span >= self.EPOCHS_SPAN:
                found += self._judge_summaries(step)
        return found

    def _judge_summaries(self, step: int) -> list[Finding]:
        """Three logs from the run's start, thousands of steps apart (epoch summaries), within 0.5% of each other,
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

    def _own_metrics(self, step: int, values: dict[str, float | None]) -> list[Finding]:
        """A preference or RL objective judged by its own metrics: its loss may sit near zero or go negative.
        Flagged only when the metrics say nothing is being learned, for 8 logs in a row after warm-up:
        every completion of a prompt scored the same (reward_std 0: zero advantage), or the policy never
        moved from the reference (rewards/margins 0)."""
        if self.warming:
            return []
        if self.objective == "rl":
            std, zero_frac = values.get("reward_std"), values.get("frac_reward_zero_std")
            if std is None and zero_frac is None:
                return []
            stuck = (std is not None and abs(std) < 1e-9) or (zero_frac is not None and zero_frac >= 1.0)
            metric = "reward_std" if std is not None else "frac_reward_zero_std"
        else:
            margin = values.get("rewards/margins")
            if margin is None:
                return []
            stuck, metric = abs(margin) < 1e-4, "rewards/margins"
        self.signal = self.signal + [(step, stuck)] if stuck else []
        if len(self.signal) == 8:
            return [Finding("loss_flat", step, {"kind": "objective", "objective": self.objective,
                                                "metric": metric, "value": values.get(metric),
                                                "from_step": self.signal[0][0], "n": len(self.signal)})]
        return []


_RL_KEYS = ("reward", "reward_std", "frac_reward_zero_std", "completion_length", "kl")
_PREFERENCE_PREFIXES = ("rewards/", "logps/", "logits/")


def _objective(values: dict[str, float | None]) -> str:
    """The trainer's objective from its log's keys: TRL's GRPO/PPO/RLOO log rewards of sampled completions,
    DPO/ORPO/KTO/SimPO log chosen/rejected rewards and log-probabilities; "" for a language-model loss."""
    if any(k in values for k in _RL_KEYS[:3]) or any(k.startswith("completions/") for k in values):
        return "rl"
    if any(k.startswith(_PREFERENCE_PREFIXES) for k in values) or "log_odds_ratio" in values:
        return "preference"
    return ""


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
