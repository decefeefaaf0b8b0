"""A loss rising well above its best, read over the logs: a jump of a whole epoch's average, a rise by a third,
a slow climb of block medians, a creep after a grad-norm spike, a new and higher level, a short run of rising logs,
a climb back past where it started; and the rise a NaN then follows. The detectors of LossWatch (loss.py) that
judge a rise; their state lives on LossWatch, pickled with the advisor in events.idx. Pure logic."""

from __future__ import annotations

import itertools
import math
from collections import deque

from loratui.logic import series
from loratui.logic.advisor.advice import Finding


class RiseWatch:
    """LossWatch's rise detectors and their thresholds."""

    BLOCK = 16
    RISE = 4 / 3  # "rising by a third"
    GRAD_SPIKE, CREEP = 5.0, 1.1
    CLIMB, CLIMB_FALL, CLIMB_RISE, CLIMB_NOISE = 3, 1.1, 1.5, 6.0
    """A climb back: logs rising in a row since the lowest, the fall before it (first log over the lowest), the
    last log over the lowest, as a ratio and in noise-sigmas (second differences)."""
    ALPHA, DOUBLE = 0.01, 2.0
    """The permutation p-value a rise must reach (`series.rise_p`): the share of noisy windows read as a rise; and a
    loss doubled (over its lowest, or an epoch's average over the epoch's before), a rise beyond any noise."""

    WINDOW: int
    window: deque[tuple[int, float]]
    prior: deque[tuple[int, float]]
    recent_grads: deque[float]
    creep: tuple[int, float, float, list[float]] | None
    creep_noise: float
    block: list[float]
    best_block: tuple[float, int, float] | None
    blocks: list[float]
    sigma: float
    lr: float | None
    warming: bool
    rose: Finding | None
    changed: bool
    epoch_loss: tuple[float, float, int] | None

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

    def _rise_stands(self) -> bool:
        """Whether a rise was found and the loss had not come back down before this NaN."""
        if self.rose is None or not self.window:
            return False
        best = self.rose.facts["best"]
        return self.window[-1][1] >= best * (1 + (self.RISE - 1) / 2)

    def _recovery(self, step: int) -> None:
        """A rise found, then the loss back down: the last 3 logs, all after the rise was found, at a median no more
        than a sixth over the level it rose from (the line `_rise_stands` draws for a rise that still stands). The
        finding says so (`recovered`: the step; `recovered_to`: that median), and the advice becomes a note: the
        live panel kept warning "Loss is rising" for a loss that had long come back below it. A rise that ran into
        a NaN, or one said in words, stays as it is; a later rise replaces it (core `_keeps`)."""
        rose = self.rose
        if rose is None or rose.facts.get("recovered") is not None or rose.facts.get("error") or \
                rose.facts.get("nan_step") is not None or not isinstance(rose.facts.get("best"), (int, float)):
            return
        after = [loss for at, loss in list(self.window)[-3:] if at > rose.step]
        if len(after) < 3:
            return
        level = series.median(after)
        if level <= rose.facts["best"] * (1 + (self.RISE - 1) / 2):
            rose.facts.update(recovered=step, recovered_to=level)
            self.changed = True

    def _after_rise(self, step: int, nan: list[Finding]) -> list[Finding]:
        """A NaN after the loss rose: divergence is the cause, and the rise becomes an error."""
        assert self.rose is not None
        if not self.rose.facts.get("error"):
            self.rose.facts.update(error=True, nan_step=step, nan_what=nan[0].facts["what"])
            self.changed = True
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
        if grad is not None and math.isfinite(grad):
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
