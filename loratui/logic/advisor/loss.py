"""The loss detectors: NaN/inf, a loss that collapses to zero, stays flat or repeats, and one that climbs
or explodes. Bounded state, one `log` call per Trainer log; findings carry the numbers they saw."""

from __future__ import annotations

import itertools
import math
from collections import deque

from loratui import events
from loratui.logic import series
from loratui.logic.advisor.advice import Finding
from loratui.logic.advisor.watches import Context
from loratui.logic.text_reader.values import UNPRINTED
from loratui.recipe import Recipe

ZERO = 1e-8
"""A printed loss of 0.0 or 0.0000: cross-entropy on real data is never exactly zero."""


class LossWatch:
    """NaN/inf, zero, flat or repeating losses, a loss rising or jumping well above its best, and the metrics
    of objectives that are not language-model losses (preference and RL trainers)."""

    FLAT_N, WINDOW, BLOCK = 30, 64, 16
    FLAT_MIN = 6
    EPOCHS_SPAN = 1000
    """Steps that three logs must span to be judged as epoch summaries (`_judge_summaries`)."""
    """Logs (spanning 100 steps or more) from which a loss can be judged flat: a robust spread from fewer is noise."""
    STILL_N = 5
    """Logs from the start that are judged as summaries whatever their steps span: five epochs' losses numbered by
    epoch (`Epoch 3/10, Loss: 3.4521`, Lightning's bar at each epoch's end) that stay within 0.5% do not learn."""
    SPIKE, SPIKE_ERROR = 5.0, 10.0
    RISE = 4 / 3  # "rising by a third"
    GRAD_SPIKE, CREEP = 5.0, 1.1
    ZERO_LR = 5
    """Logs in a row with a learning rate of exactly 0: more than a warm-up's first log or a schedule's last."""
    CHANCE_N = 4
    COLLAPSE_N, COLLAPSE_GRAD, COLLAPSE_SHARE, COLLAPSE_DRIFT = 12, 20.0, 2 / 3, 0.05
    """A collapse (`_collapse`): logs judged, the fall of the grad norm's median from the first logs', the share of
    ln(vocab) the loss still sits at, and the most its trend may move over those logs (share of its level)."""
    CLIMB, CLIMB_FALL, CLIMB_RISE, CLIMB_NOISE = 3, 1.1, 1.5, 6.0
    """A climb back: logs rising in a row since the lowest, the fall before it (first log over the lowest), the
    last log over the lowest, as a ratio and in noise-sigmas (second differences)."""
    ALPHA, DOUBLE = 0.01, 2.0
    HUGE_LOSS, HUGE_GRAD = 1e8, 1e6
    """The permutation p-value a rise must reach (`series.rise_p`): the share of noisy windows read as a rise."""

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
                self._own_metrics(e.step, values) + self._no_gradient(e.step, values.get("grad_norm"))
        spike = self._spike(e.step, loss, values.get("grad_norm")) if loss is not None and _finite(loss) else None
        spike = spike or self._huge(e.step, loss, values.get("grad_norm"))
        found = [spike] if spike else []
        nan = self._nan(e.step, values, sorted(set(ctx.gpu_names.values())), bool(spike))
        found += self._after_rise(e.step, nan) if nan and self._rise_stands() else nan
        if loss is None or not _finite(loss):
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
        if loss is not None and not _finite(loss):
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
        self.bad_grad_streak = 0 if _finite(grad) else self.bad_grad_streak + 1
        if _finite(grad):
            self._scaler_start(loss)
            return []
        # fp16's grad scaler skips steps with inf gradients on purpose: only a streak means trouble there.
        fp16 = self.recipe is not None and self.recipe.training.fp16
        if self.bad_grad_streak >= (3 if fp16 else 1) and not spike:
            found = Finding("nan_loss", step, {"what": "grad_norm", "value": str(grad), "lr": self.lr,
                                               "streak": self.bad_grad_streak, "names": names, "loss": loss})
            if not self.grad_seen and loss is not None and _finite(loss) and self.bad_grad_streak <= 3:
                self.start_nan = found  # maybe the scaler's first overflows: withdrawn if the next grads are finite
            return [found]
        return []

    def _scaler_start(self, loss: float | None) -> None:
        """A finite grad norm. Mixed precision's loss scaler starts high (2^16) and skips the first steps whose
        gradients overflow, so a run's first logs may show grad_norm nan or inf beside a finite loss and then
        train normally: a NaN at the start that the next logs recover from, with the loss finite throughout, is
        withdrawn (TableMASTER-mmocr#32: `grad_norm: nan`, then 3.98 while the loss fell 1.91 -> 0.92)."""
        self.grad_seen = True
        if self.start_nan is not None and loss is not None and _finite(loss):
            self.start_nan.facts["withdrawn"] = True
            self.withdrawn, self.changed = self.start_nan, True
        self.start_nan = None

    def _eval_nan(self, step: int, values: dict[str, float | None], ctx: Context) -> list[Finding]:
        """An evaluation's loss that is not finite (fp16 overflowing in eval, a batch with no labels): a NaN
        the training logs may never show."""
        loss = values.get("eval_loss")
        if loss is None:
            return []
        if _finite(loss):
            return self._eval_still(step, loss, values.get("epoch"))
        if self.zero_streak and not self.scored:
            # A training loss of exactly 0 from the first log and a NaN eval loss say one thing: no label token
            # is scored (a mean over none is 0/0 in eval). The zero is the finding, not a NaN to chase.
            return []
        return [Finding("nan_loss", step, {"what": "eval_loss", "value": str(loss), "lr": self.lr,
                                           "names": sorted(set(ctx.gpu_names.values()))})]

    def _epoch_jump(self, step: int, loss: float, epoch: float | None) -> Finding | None:
        """A whole epoch's loss (one log per epoch, fastai's or Keras' summary rows) at twice the epoch's before it,
        0.5 or more above: an average over a whole epoch has no batch noise to double it, so the weights broke
        (fastai#1736: train_loss 2.76 -> 6.23 from epoch 1 to 2, the accuracy 0.44 -> 0.08). Not a whole multiple
        (a loss summed over gradient accumulation steps)."""
        if epoch is None or epoch != int(epoch) or epoch < 0:
            return None
        before, self.epoch_loss = self.epoch_loss, (epoch, loss, step)
        if before is None or epoch != before[0] + 1 or before[1] <= 0:
            return None
        ratio = loss / before[1]
        if ratio < self.DOUBLE or loss - before[1] < 0.5 or abs(ratio - round(ratio)) <= 0.06 * round(ratio):
            return None
        return Finding("loss_diverging", step, {"kind": "epoch_jump", "best": before[1], "now": loss, "lr": self.lr,
                                                "epoch": epoch, "best_step": before[2]})

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

    def _rise_stands(self) -> bool:
        """Whether a rise was found and the loss had not come back down before this NaN."""
        if self.rose is None or not self.window:
            return False
        best = self.rose.facts["best"]
        return self.window[-1][1] >= best * (1 + (self.RISE - 1) / 2)

    def _after_rise(self, step: int, nan: list[Finding]) -> list[Finding]:
        """A NaN after the loss rose: divergence is the cause, and the rise becomes an error."""
        assert self.rose is not None
        if not self.rose.facts.get("error"):
            self.rose.facts.update(error=True, nan_step=step, nan_what=nan[0].facts["what"])
            self.changed = True
        return []

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
        big_loss = loss is not None and _finite(loss) and abs(loss) >= self.HUGE_LOSS
        big_grad = grad is not None and _finite(grad) and grad >= self.HUGE_GRAD
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
            elif (len(self.flat) == 3 and span >= self.EPOCHS_SPAN) or len(self.flat) == self.STILL_N:
                found += self._judge_summaries(step)
        return found

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

    def _rise(self, step: int, loss: float) -> Finding | None:
        """The loss rising by a third from its lowest level, a trend rather than noise: the Theil-Sen line
        since the lowest 3-log median of the last 64 logs rose 4/3-fold, the last 3 logs' median stands
        clear of that lowest median, Mann-Kendall z > 1.64 over at least 4 logs. Not while the learning rate
        still warms up, and not when the new level is a whole multiple of the old one and steady (a loss
        summed over gradient accumulation, not divergence)."""
        self.window.append((step, loss))
        if len(self.window) < 4 or self.warming:
            return None
        ys = [v for _, v in self.window]
        if len(ys) >= 16 and (len(ys) < self.WINDOW or step % 16 == 0):
            self.sigma = series.noise(ys)  # refreshed every 16 logs once the window is full: it moves slowly
        # Past 16 logs the noise can be measured: the rise must stand clear of it (6 sigma: the lowest of 64
        # medians sits well below the level by chance). A handful of logs has only its rank trend.
        floor = max(0.05, 6 * self.sigma) if len(ys) >= 16 else 0.05
        now, lowest = series.median(ys[-3:]), min(ys)
        if lowest <= 0 or now < self.RISE * lowest * 0.9 or now - lowest < floor:  # ratios need a positive loss
            return None  # the cheap tests first: the lowest log is below every 3-log median
        levels = [series.median(ys[max(0, i - 1):i + 2]) for i in range(len(ys))]
        anchor = min(range(len(ys) - 1), key=lambda i: (levels[i], i))
        segment = ys[anchor:]
        if len(segment) < 4:
            return None
        start, end = series.theil_sen(segment)
        if not (end >= self.RISE * start and end - start >= floor and now - levels[anchor] >= floor
                and now >= start * (1 + (self.RISE - 1) / 2) and series.mann_kendall(segment) > 1.64):
            return None
        p = -1.0 if _scale_shift(segment) else self._beyond_noise(ys, now, levels[anchor])
        return self._rise_found(step, start, end, anchor, len(segment), p)

    def _rise_found(self, step: int, start: float, end: float, anchor: int, logs: int,
                    p: float | None) -> Finding | None:
        """The rise of the window's `logs` logs from its log `anchor` (the Theil-Sen line from `start` to `end`),
        unless `p` is -1: a level a whole multiple of the old one, or no more than the logs' noise."""
        if p == -1.0:
            return None
        return Finding("loss_diverging", step, {
            "kind": "rise", "best": start, "best_step": self.window[anchor][0], "now": end, "lr": self.lr,
            "window": logs, "p": p, "logged": (self.window[anchor][1], self.window[-1][1])})

    def _beyond_noise(self, ys: list[float], now: float, lowest: float) -> float | None:
        """Whether a rise found in `ys` is more than their noise: the last logs at twice the lowest level (no
        noise of a healthy loss doubles it: None is returned for "yes" without a p), or a permutation test
        (`series.rise_p`) at `ALPHA`, which holds for any noise and any window length: its p; else -1."""
        if now >= self.DOUBLE * lowest:
            return None
        p = series.rise_p(ys)
        return p if p <= self.ALPHA else -1.0

    def _slow_rise(self, step: int, loss: float) -> Finding | None:
        """A climb too slow for the 64-log window: medians of blocks of 16 logs against the lowest block of
        the run, the last two 4/3 of it and 6 block-noises over it, Mann-Kendall rising over the blocks since.
        Constant memory however long the run."""
        self.block.append(loss)
        if len(self.block) < self.BLOCK:
            return None
        level, sigma = series.median(self.block), series.noise(self.block) * 1.25 / self.BLOCK ** 0.5
        self.block = []
        if self.warming:
            return None
        if self.best_block is None or level < self.best_block[0]:
            self.best_block, self.blocks = (level, step, sigma), [level]
            return None
        self.blocks = (self.blocks + [level])[-8:]
        best, best_step, best_sigma = self.best_block
        if best <= 0:
            return None  # a loss that goes negative (an NLL of densities) has no "a third above"
        floor = max(0.05, 6 * max(sigma, best_sigma))
        last = self.blocks[-2:]
        if len(self.blocks) >= 4 and all(v >= self.RISE * best and v - best >= floor for v in last) and \
                series.mann_kendall(self.blocks) > 1.64 and not _scale_shift(self.blocks):
            return Finding("loss_diverging", step, {"kind": "rise", "best": best, "best_step": best_step,
                                                    "now": level, "lr": self.lr, "blocks": len(self.blocks),
                                                    "window": self.BLOCK * (len(self.blocks) - 1)})
        return None

    def _creep(self, step: int, loss: float, grad: float | None) -> Finding | None:
        """A grad-norm spike (5x the recent median, from the third log on: a pasted window of five dicts shows it) and
        the loss creeping up after it, 10% over its level before
        the spike within 8 logs: up in every log, or (from 4 logs on) a Mann-Kendall rise whose last 3 logs' median
        stands 10% over too, so one log that dips is not the end of it; and that median 3 noise-sigmas over the
        level (the noise of the logs before the spike, when 4 or more were logged): grad-norm spikes come and go in
        healthy runs, and a noisy loss is 10% up after one by chance."""
        found = None
        if self.creep is not None:
            at, before, spike, after = self.creep
            after.append(loss)
            rising = all(b > a for a, b in zip([before] + after, after))
            # One log that dips does not end a creep that still trends up (Mann-Kendall over the logs since).
            trend = series.mann_kendall([before] + after)
            if len(after) > 8 or (not rising and trend <= (1.64 if len(after) >= 4 else 0.0)):
                self.creep = None
            elif len(after) >= 3 and loss >= self.CREEP * before and \
                    (rising or series.median(after[-3:]) >= self.CREEP * before) and \
                    series.median(after[-3:]) - before >= 3 * self.creep_noise:
                found = Finding("loss_diverging", step, {
                    "kind": "creep", "best": before, "best_step": at, "now": loss, "lr": self.lr,
                    "grad": spike, "window": len(after)})
                self.creep = None
        if grad is not None and _finite(grad):
            grads = list(self.recent_grads)
            if self.creep is None and found is None and len(grads) >= 2 and grad >= self.GRAD_SPIKE * max(series.median(grads), 1e-6) and len(self.prior) >= 2:
                self.creep = (step, series.median([v for _, v in list(self.prior)[-4:-1]] or [loss]), grad, [loss])
                earlier = [v for _, v in list(self.prior)[:-1]]
                self.creep_noise = series.noise(earlier) if len(earlier) >= 4 else 0.0
            self.recent_grads.append(grad)
        return found

    def _level_up(self, step: int) -> Finding | None:
        """The loss moving to a level a third higher late in the window, by a step or a ramp, and staying there:
        the median of the logs since the split a third above the median before it and the last 3 logs' median too,
        and a permutation test on the change of level (`series.shift_p`) at `ALPHA`. The last 32 logs; not while
        the learning rate warms up, not a whole-multiple step (a loss summed over gradient accumulation)."""
        ys = [v for _, v in self.window][-32:]
        if len(ys) < 6 or self.warming or min(ys) <= 0 or series.median(ys[-3:]) < self.RISE * min(ys):
            return None  # the last test is cheap and necessary: the level before is at least the lowest log
        _, k = series.shift_score(ys)
        if k == 0:
            return None
        before, after = series.median(ys[:k]), series.median(ys[k:])
        # The change must also stand 5 standard errors of a median's difference clear of the noise: each log's
        # test looks again at much the same window, so one permutation test alone would be passed by chance.
        error = 1.2533 * series.noise(ys) * (1 / k + 1 / (len(ys) - k)) ** 0.5
        if after < self.RISE * before or after - before < max(0.05, 5 * error) or \
                series.median(ys[-3:]) < self.RISE * before or _scale_shift(ys):
            return None
        p = series.shift_p(ys)
        if p > self.ALPHA:
            return None
        at = len(self.window) - len(ys) + k
        return Finding("loss_diverging", step, {
            "kind": "shift", "best": before, "best_step": self.window[at - 1][0], "now": after, "lr": self.lr,
            "window": len(ys) - k, "before_n": k, "p": p})

    def _step_up(self, step: int) -> Finding | None:
        """The loss jumping to a higher level and staying there: every log since the jump a third above every
        log before it (at least two before and three since, so one wild log is neither, and a whole-multiple step can be
        told), a rank test that needs no noise
        estimate and so works on a handful of epoch summaries as on a long window. Not a whole-multiple step
        to a steady level (a loss summed over gradient accumulation)."""
        ys = [v for _, v in self.window]
        if len(ys) < 4 or self.warming or min(ys) <= 0:
            return None
        if min(ys[-3:]) < self.RISE * max(ys[:2]):
            return None  # every split has these logs on its sides: no split can pass (the common, healthy case)
        highest = list(itertools.accumulate(ys, max))  # highest[k - 1]: the top of the k logs before
        lowest = ys[-1]
        for k in range(len(ys) - 2, 1, -1):  # after = ys[k:], before = ys[:k], at least two logs each
            lowest = min(lowest, ys[k])
            if len(ys) - k < 3:
                continue
            before = highest[k - 1]
            if lowest >= self.RISE * before and lowest - before >= 0.05 and not _scale_shift(ys):
                return Finding("loss_diverging", step, {
                    "kind": "step", "best": series.median(ys[:k]), "best_step": self.window[k - 1][0],
                    "now": series.median(ys[k:]), "lr": self.lr, "window": len(ys) - k, "ceiling": before,
                    "floor": lowest})
        return None

    def _short_rise(self, step: int) -> Finding | None:
        """A rise over a handful of logs, too few to measure noise or to smooth with 3-log medians: from the
        lowest log on, Mann-Kendall rising over at least 5 logs, the Theil-Sen line up half a third, the last log
        a third above the lowest, and the line starting near the lowest (within half a third: a lone low log
        that the others never came near is a dip, not a level the loss rose from)."""
        ys = [v for _, v in self.window]
        if len(ys) >= 16 or self.warming or min(ys) <= 0:
            return None
        anchor = min(range(len(ys)), key=lambda i: (ys[i], i))
        if anchor > 1:
            return None  # the lowest of a few logs picked from the middle would make any noise look like a rise
        segment, half = ys[anchor:], 1 + (self.RISE - 1) / 2
        if len(segment) < 5 or segment[-1] < self.RISE * segment[0] or segment[-1] - segment[0] < 0.05:
            return None
        start, end = series.theil_sen(segment)
        if end < half * start or start > half * segment[0] or series.mann_kendall(segment) <= 1.64 or \
                series.mann_kendall(ys) <= 1.28 or \
                _scale_shift(segment):
            return None
        p = self._beyond_noise(ys, series.median(ys[-3:]), segment[0])
        if p == -1.0 and anchor == 0 and all(b > a for a, b in itertools.pairwise(ys)):
            # every log above the one before from the first: one order in n! (1/120 for 5), which a permutation
            # test over 5 logs cannot reach at ALPHA (near-orders score as high); a third up, it is no noise
            p = 1 / math.factorial(len(ys))
        return self._rise_found(step, start, end, anchor, len(segment), p)

    def _climb_back(self, step: int) -> Finding | None:
        """A few logs that fell and then climbed back past where they started: from the lowest log, every log
        higher than the one before for at least `CLIMB` logs, the last at or above the first log and half again
        the lowest. Too few logs for a trend test to reach significance, but a healthy loss, however noisy, does
        not climb step after step back to its starting value once it has fallen (`2.3, 1.8, 1.5, 1.4, 1.6, 2.1,
        2.9`: a learning rate too high once the easy part is learned). Short pastes only; longer ones have the
        trend tests."""
        ys = [v for _, v in self.window]
        if len(ys) >= 16 or self.warming or min(ys) <= 0:
            return None
        low = min(range(len(ys)), key=lambda i: (ys[i], -i))
        after = ys[low:]
        if low == 0 or len(after) <= self.CLIMB or ys[0] < self.CLIMB_FALL * ys[low]:
            return None  # it must have fallen first: a rise from the first log is the trend tests' to judge
        climbing = all(b > a for a, b in itertools.pairwise(after))
        if not climbing or after[-1] < ys[0] or after[-1] < self.CLIMB_RISE * ys[low] or \
                after[-1] - ys[low] < max(0.05, self.CLIMB_NOISE * series.noise(ys)):
            return None  # and clear of the logs' own scatter: a noisy plateau's lowest log is followed by higher ones
        return Finding("loss_diverging", step, {
            "kind": "climb", "best": ys[low], "best_step": self.window[low - len(ys)][0], "now": after[-1],
            "first": ys[0], "lr": self.lr, "window": len(after) - 1})

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
        if not self.vocab or self.collapsed or grad is None or not _finite(grad):
            return []
        self.tail.append((step, loss, grad))
        early = [g for g in self.grads[:3] if _finite(g)]
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


    def _no_gradient(self, step: int, grad: float | None) -> list[Finding]:
        """A preference or RL objective's first three grad norms all exactly 0: no gradient reaches the trained
        weights, whatever its loss and metrics say (a DPO loss stuck at ln 2, a GRPO loss at 0)."""
        if grad is None or len(self.grads) >= 3:
            return []
        self.grads.append(grad)
        if len(self.grads) == 3 and self.grads.count(0.0) == 3:
            return [Finding("loss_flat", step, {"kind": "zero_grad", "zeros": 3, "n": 3, "lr_zero": self.lr == 0.0})]
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


def _scale_shift(segment: list[float]) -> bool:
    """Whether a rise is one jump to a steady level a whole multiple (2-64x) of the one before: transformers
    before 4.46 summed the logged loss over gradient accumulation steps, so a resumed or re-logged run can
    step by that factor without diverging."""
    jump = max(range(1, len(segment)), key=lambda i: segment[i] / max(segment[i - 1], 1e-12))
    before, after = segment[:jump], segment[jump:]
    if len(after) < 3 or series.mann_kendall(after) > 1.0:
        return False
    ratio = series.median(after) / max(series.median(before), 1e-12)
    k = round(ratio)
    return 2 <= k <= 64 and abs(ratio - k) <= 0.06 * k


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


def _finite(value: float) -> bool:
    return value == value and abs(value) != float("inf")


def _warmup_steps(recipe: Recipe | None, max_steps: int) -> int:
    """Steps of learning-rate warmup, when the recipe and the run's length say."""
    if recipe is None:
        return 0
    t = recipe.training
    return t.warmup_steps or int(t.warmup_ratio * max(max_steps, t.max_steps, 0))
