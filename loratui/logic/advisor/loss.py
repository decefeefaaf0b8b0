"""The loss detectors: NaN/inf, a loss that collapses to zero, stays flat or repeats (loss_flat.py), and one that
climbs or explodes (the slower rises in loss_rise.py). Bounded state, one `log` call per Trainer log; findings carry
the numbers they saw."""

from __future__ import annotations

import math
from collections import deque

from loratui import events
from loratui.logic import series
from loratui.logic.advisor.advice import Finding
from loratui.logic.advisor.loss_flat import ZERO, FlatWatch
from loratui.logic.advisor.loss_rise import RiseWatch
from loratui.logic.advisor.watches import Context
from loratui.logic.text_reader.values import UNPRINTED
from loratui.recipe import Recipe


class LossWatch(FlatWatch, RiseWatch):
    """NaN/inf, zero, flat or repeating losses, a loss rising or jumping well above its best, and the metrics
    of objectives that are not language-model losses (preference and RL trainers)."""

    WINDOW = 64
    SPIKE, SPIKE_ERROR = 5.0, 10.0
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
        self.dpo_start: tuple[int, float] | None = None  # the first DPO log at or below ln 2 (no preference)
        self.dpo_above: list[tuple[int, float, float | None]] = []  # (step, loss, margin) in a row above it since
        self.dpo_found = False  # a DPO loss turned to the rejected answers was found (said once)
        self.rose: Finding | None = None  # the rise found, escalated if NaN follows
        self.changed = False  # a finding already handed out changed (the advisor rebuilds its items)
        self.evals: list[tuple[int, float, float | None]] = []  # (step, eval loss, epoch) of the first evaluations
        self.epoch_loss: tuple[float, float, int] | None = None  # (epoch, loss, step) of the last whole-epoch log

    def log(self, ctx: Context, e: events.Log) -> list[Finding]:
        """Fold one Trainer log in; findings it completes."""
        self.changed = False
        values = {k: events.num_in(v) for k, v in e.values.items()}
        if events.is_train_summary(values) or "train_loss" in values or any(k.startswith("eval_") for k in values):
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
                self._own_metrics(e.step, values) + self._no_gradient(e.step, values.get("grad_norm")) + \
                self._prefers_rejected(e.step, values)
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
            if self.rose is None or self.rose.facts.get("recovered") is not None:
                self.rose = rise  # the first is the one the advisor keeps, until the loss came back from it
            found.append(rise)
        else:
            self._recovery(e.step)
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


    def _prefers_rejected(self, step: int, values: dict[str, float | None]) -> list[Finding]:
        """TRL's DPO loss (-log sigmoid(beta * margin)) is ln 2 where the policy prefers neither answer: it starts
        there (the policy is the reference) and falls as the chosen answers pull ahead. One that was at or below it
        and then stays above it by 0.1 for PREFERS_REJECTED_N logs in a row prefers the rejected answers, where
        rewards/margins, when logged, is negative in each (a mean loss above ln 2 beside a positive mean margin is a
        wide spread of pairs, not a preference turned around). ORPO, CPO/SimPO (nll_loss) and KTO (kl) add other terms
        to their loss: not judged against ln 2."""
        loss = values.get("loss")
        if self.objective != "preference" or getattr(self, "dpo_found", True) or loss is None or \
                not math.isfinite(loss) or any(key in values for key in _NOT_DPO):
            return []  # getattr: a LossWatch pickled before these fields (an older events.idx) judges nothing
        if loss <= LN2 + 0.05:
            self.dpo_start, self.dpo_above = self.dpo_start or (step, loss), []
            return []
        margin = values.get("rewards/margins")
        if self.dpo_start is None or loss < LN2 + 0.1 or (margin is not None and margin >= 0):
            self.dpo_above = []
            return []
        self.dpo_above = self.dpo_above + [(step, loss, margin)]
        if len(self.dpo_above) < PREFERS_REJECTED_N:
            return []
        self.dpo_found = True
        return [Finding("loss_diverging", step, {"kind": "prefers_rejected", "start": self.dpo_start,
                                                 "above": list(self.dpo_above), "lr": self.lr})]


LN2 = math.log(2)
"""A pairwise preference loss of a policy with no preference between the chosen and the rejected answer."""
PREFERS_REJECTED_N = 5
"""Logs in a row above ln 2 that say a DPO policy stays on the rejected side, not one noisy log."""
_NOT_DPO = ("nll_loss", "log_odds_ratio", "kl")
"""Keys of preference trainers whose loss is not DPO's sigmoid alone (TRL's ORPO, CPO/SimPO, KTO; DPO's rpo_alpha)."""
_RL_KEYS = ("reward", "reward_std", "frac_reward_zero_std", "reward_mean")
"""Keys only an RL trainer logs (TRL's GRPO/PPO/RLOO, and `reward_mean` of other RL frameworks' printed tables)."""
_PREFERENCE_PREFIXES = ("rewards/", "logps/", "logits/")


def _objective(values: dict[str, float | None]) -> str:
    """The trainer's objective from its log's keys: TRL's GRPO/PPO/RLOO log rewards of sampled completions,
    DPO/ORPO/KTO/SimPO log chosen/rejected rewards and log-probabilities; "" for a language-model loss."""
    if any(k in values for k in _RL_KEYS) or any(k.startswith("completions/") for k in values):
        return "rl"
    if any(k.startswith(_PREFERENCE_PREFIXES) for k in values) or "log_odds_ratio" in values:
        return "preference"
    return ""
