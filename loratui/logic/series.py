"""Bounded series for display (peak-preserving downsampling, loss smoothing) and what a logged loss means.

A 10-hour run has ~400k samples; a pane shows ~200 columns. `PeakSeries` keeps at most `capacity`
buckets and, when full, merges neighbours pairwise keeping each pair's maximum, so a one-sample spike is
never averaged away, and memory stays bounded however long the run.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from loratui import events


@dataclass
class PeakSeries:
    """(x, max y) buckets of equal width in points, merged pairwise by max as they fill."""

    capacity: int = 2048
    xs: list[float] = field(default_factory=list)
    ys: list[float] = field(default_factory=list)
    width: int = 1  # points per bucket
    _fill: int = 0  # points in the last bucket

    def add(self, x: float, y: float) -> None:
        """Append one point."""
        if self._fill and self._fill < self.width:
            self.ys[-1] = max(self.ys[-1], y)
            self.xs[-1] = x
            self._fill += 1
            return
        self.xs.append(x)
        self.ys.append(y)
        self._fill = 1
        if len(self.xs) > self.capacity:
            self._halve()

    def _halve(self) -> None:
        full = len(self.xs) // 2 * 2
        xs = [self.xs[i + 1] for i in range(0, full, 2)]
        ys = [max(self.ys[i], self.ys[i + 1]) for i in range(0, full, 2)]
        partial = len(self.xs) % 2
        if partial:
            xs.append(self.xs[-1])
            ys.append(self.ys[-1])
        self.xs, self.ys = xs, ys
        self.width *= 2
        self._fill = self._fill if partial else self.width

    def __len__(self) -> int:
        return len(self.xs)


def bucket_max(values: Sequence[float], buckets: int) -> list[float]:
    """`values` reduced to at most `buckets` numbers, each the max of its slice (NaNs ignored)."""
    n = len(values)
    if n <= buckets or buckets <= 0:
        return list(values)
    out = []
    for b in range(buckets):
        lo, hi = b * n // buckets, (b + 1) * n // buckets
        chunk = [v for v in values[lo:max(hi, lo + 1)] if not math.isnan(v)]
        out.append(max(chunk) if chunk else math.nan)
    return out


def ema_steps(steps: Sequence[int], values: Sequence[float], alpha: float = 0.1) -> list[float]:
    """An EMA whose weight is per step, not per point: `alpha` for a point one step after the last,
    1 - (1 - alpha)^gap for one `gap` steps after it. A run logged every 10 steps (or a thinned series)
    is smoothed over as many steps as one logged every step; per point, its line lagged ten times as far."""
    out: list[float] = []
    current: float | None = None
    last = None
    for step, v in zip(steps, values):
        if math.isfinite(v):
            weight = 1 - (1 - alpha) ** max(step - last, 1) if last is not None else 1.0
            current = v if current is None else weight * v + (1 - weight) * current
            last = step
        out.append(current if current is not None else math.nan)
    return out


def mean(values: Iterable[float]) -> float | None:
    """Arithmetic mean of the finite values, or None."""
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else None


def logged_loss(values: dict[str, float | None]) -> float | None:
    """The loss a training log stands for: NaN where transformers printed 0.0 for a NaN step
    (`events.logged_loss`, the one rule)."""
    return events.logged_loss(values)  # type: ignore[arg-type]


# -- robust statistics for short and long series: medians, not means, so one wild log moves nothing ----------


def median(values: Sequence[float]) -> float:
    """The median of a non-empty sequence."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def noise(values: Sequence[float]) -> float:
    """The series' point-to-point noise as a standard deviation, from second differences (a straight
    trend adds nothing to them, so a steady climb is not mistaken for noise): 1.4826 x their median
    absolute value / sqrt 6."""
    second = [abs(c - 2 * b + a) for a, b, c in zip(values, values[1:], values[2:])]
    return 1.4826 * median(second) / math.sqrt(6) if second else 0.0


def theil_sen(ys: Sequence[float]) -> tuple[float, float]:
    """(start, end) of the Theil-Sen line through ys at x = 0..n-1: the median pairwise slope, so up to
    29% of the points may be wild without moving it. O(n^2): meant for windows of tens of points."""
    n = len(ys)
    if n < 2:
        return (ys[0], ys[0]) if ys else (math.nan, math.nan)
    slope = median([(ys[j] - ys[i]) / (j - i) for i in range(n) for j in range(i + 1, n)])
    start = median([y - slope * x for x, y in enumerate(ys)])
    return start, start + slope * (n - 1)


def mann_kendall(ys: Sequence[float]) -> float:
    """The Mann-Kendall trend statistic as a z score (> 1.64: rising at about 5% one-sided); it ranks, so
    it needs no distribution and works from 4 points (4 rising points give z = 1.70)."""
    n = len(ys)
    if n < 3:
        return 0.0
    s = sum((ys[j] > ys[i]) - (ys[j] < ys[i]) for i in range(n) for j in range(i + 1, n))
    var = n * (n - 1) * (2 * n + 5) / 18
    return (s - (s > 0) + (s < 0)) / math.sqrt(var)


FALLS_N, FALLS_BY, FALLS_SHORT = 10, 0.8, 5
"""`falls_through`: at least this many logs, the last third's median at most this share of the first third's; from
`FALLS_SHORT` logs on, `falls_short`."""


def falls_through(ys: Sequence[float]) -> bool:
    """Whether a loss series falls clearly and is still falling at its end: 10 logs or more, the last third's
    median a fifth or more below the first third's, and a Mann-Kendall fall over the second half (z < -1.64):
    not a loss that fell during warm-up and then stood still, nor one that rose back."""
    n = len(ys)
    if n < FALLS_N:
        return falls_short(ys)
    third = n // 3
    return median(ys[-third:]) <= FALLS_BY * median(ys[:third]) and mann_kendall(ys[n // 2:]) < -1.64


def falls_short(ys: Sequence[float]) -> bool:
    """`falls_through` for 5 to 9 logs, too few for a trend test over half of them: a Mann-Kendall fall over all
    of them (z < -1.64: at most one pair out of order in 5), the last two a fifth below the first two, and every log
    of the second half below the one before it (still falling at its end, not a fall that then stood still)."""
    n = len(ys)
    if not FALLS_SHORT <= n < FALLS_N:
        return False
    second = ys[n // 2:]
    return mann_kendall(ys) < -1.64 and median(ys[-2:]) <= FALLS_BY * median(ys[:2]) and \
        all(b < a for a, b in itertools.pairwise(second))


def rise_score(ys: Sequence[float]) -> float:
    """How far a series rose from its lowest level: the Theil-Sen line's end over the logs since the lowest 3-log
    median (the last 3 logs excluded from where it may start), minus that median, in units of the series' noise (`noise`: second
differences, which a straight climb or descent leaves at zero): a rise made of small orderly steps stands out, one
made of the noise's own jumps does not. The statistic `rise_p` ranks."""
    n = len(ys)
    if n < 4:
        return 0.0
    levels = [median(ys[max(0, i - 1):i + 2]) for i in range(n - 3)]
    anchor = min(range(len(levels)), key=lambda i: (levels[i], i))
    segment = ys[anchor:]
    m = len(segment)
    if m <= 16:
        slope = median([(segment[j] - segment[i]) / (j - i) for i in range(m) for j in range(i + 1, m)])
    else:  # long segments: slopes across the half-way gap only, O(m) and as robust
        half = m // 2
        slope = median([(segment[i + half] - segment[i]) / half for i in range(m - half)])
    start = median([y - slope * x for x, y in enumerate(segment)])
    rise = start + slope * (m - 1) - levels[anchor]
    return rise / max(noise(ys), 1e-9 * abs(levels[anchor]), 1e-12) if rise > 0 else 0.0


def shift_score(ys: Sequence[float]) -> tuple[float, int]:
    """(score, split) of the largest rise of the level: over every split leaving at least 2 logs before and 3
    after, the median after minus the median before, in units of the series' noise (`noise`); the split is where
    the logs after begin. A change of level rather than a line: a loss that steps or ramps up late in a window
    whose earlier part was level, which one straight line from the lowest point fits badly."""
    n = len(ys)
    best, split = 0.0, 0
    for k in range(2, n - 2):
        shift = median(ys[k:]) - median(ys[:k])
        if shift > best:
            best, split = shift, k
    scale = max(noise(ys), 1e-9 * abs(median(ys)), 1e-12)
    return best / scale, split


def shift_p(ys: Sequence[float], draws: int = 499, enough: int = 8) -> float:
    """`rise_p` for `shift_score`: how often the same logs shuffled show as large a change of level, the split
    chosen again in every shuffle."""
    return _permutation_p(ys, lambda v: shift_score(v)[0], draws, enough)


def rise_p(ys: Sequence[float], draws: int = 499, enough: int = 8) -> float:
    """A permutation p-value for `rise_score`: how often the same values in a random order rise as far. It holds
    for any noise distribution and any window length (the order is all it tests), and, because the lowest level is
    chosen again in every shuffle, the choice of where the rise starts is paid for. Sequential (Besag-Clifford):
    once `enough` shuffles rise as far the series is plainly noise and the drawing stops. Seeded by the length, so
    one series always gets one answer."""
    return _permutation_p(ys, rise_score, draws, enough)


def _permutation_p(ys: Sequence[float], score: Callable[[Sequence[float]], float], draws: int, enough: int) -> float:
    observed = score(ys)
    if observed <= 0:
        return 1.0
    rng = random.Random(len(ys))
    shuffled, hits = list(ys), 0
    for done in range(1, draws + 1):
        rng.shuffle(shuffled)
        hits += score(shuffled) >= observed
        if hits >= enough:
            return hits / done
    return (hits + 1) / (draws + 1)
