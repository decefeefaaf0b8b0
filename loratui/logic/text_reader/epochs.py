"""A step counter printed beside an epoch of a total (`Epoch [2/3], Step [10/30]`, `epoch 2/3 step 400/900`).

Scripts print two kinds: the loader's batches, counted from 1 again each epoch (the PyTorch tutorial's), and the
run's own step, which counts on. The series tells them apart: a counter that starts again when the epoch changes
is the epoch's, one that counts on is the run's. Until an epoch changes, the numbers decide where they can: a
run's counter of `T` over `E` epochs stays within its epoch's share of `T`, so a counter outside it is the epoch's;
in the first epoch the step is the same either way. Otherwise the line's step is left unread (never guessed).
"""

from __future__ import annotations

from dataclasses import dataclass

RUN, EPOCH = "run", "epoch"


@dataclass(frozen=True)
class Reading:
    """What one line says: the run's step, its total steps and the epochs done (None: not known yet)."""

    step: int | None
    total: int | None = None
    epoch: float | None = None


def _numbers_say(epoch: int, n: int, total: int, epochs: int) -> str:
    """EPOCH where a run's counter could not read `n` at this epoch, else "" (both fit). A run's counter of `total`
    is a multiple of the epochs and reads (epoch-1)*share..epoch*share, ends included (0- or 1-based)."""
    if total % epochs:
        return EPOCH
    share = total // epochs
    return "" if (epoch - 1) * share <= n <= epoch * share else EPOCH


def read(kind: str, epoch: int, n: int, total: int, epochs: int) -> Reading:
    """A line's reading once the counter's kind is known (RUN, EPOCH, or "" for not known)."""
    if kind == RUN:
        return Reading(n, total, epochs * n / total)
    if kind == EPOCH:
        return Reading((epoch - 1) * total + n, epochs * total, epoch - 1 + n / total)
    return Reading(n if epoch == 1 else None)  # the first epoch's step is the run's either way


def read_alone(epoch: int, n: int, total: int, epochs: int) -> Reading:
    """One line with no series around it (a pasted line, a NaN's own step)."""
    return read(_numbers_say(epoch, n, total, epochs), epoch, n, total, epochs)


@dataclass
class EpochCounter:
    """The counter's kind, learnt from the lines of one output."""

    kind: str = ""
    _last: tuple[int, int] | None = None  # (epoch, n) of the last line

    def read(self, epoch: int, n: int, total: int, epochs: int) -> Reading:
        if not self.kind:
            self.kind = self._series_says(epoch, n) or _numbers_say(epoch, n, total, epochs)
        self._last = (epoch, n)
        return read(self.kind, epoch, n, total, epochs)

    def _series_says(self, epoch: int, n: int) -> str:
        """At a later epoch, a counter at or below its last value started again; one above it counts on."""
        if self._last is None or epoch <= self._last[0]:
            return ""
        return EPOCH if n <= self._last[1] else RUN


__all__ = ["EPOCH", "RUN", "EpochCounter", "Reading", "read_alone"]
