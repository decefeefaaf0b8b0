"""A run's duration from its events' wall-clock times, robust to the clock being set back.

`last - first` goes negative when NTP or a resumed VM sets the clock back an hour mid-run. Summing the
forward gaps between events instead would count, again and again, the milliseconds by which two writers'
events (supervisor and trainer) land out of order. So: time advances to the newest event seen; an event
older than that by under `CLOCK_STEP_S` is such a reordering and adds nothing; older by more, the clock
was set back, and time goes on from it.
"""

from __future__ import annotations

CLOCK_STEP_S = 10.0


def advance(covered: float, newest: float | None, t: float) -> tuple[float, float]:
    """(covered seconds, newest time) after an event at `t`."""
    if newest is None or newest - CLOCK_STEP_S > t:
        return covered, t  # the first event, or the clock was set back: go on from here
    if t > newest:
        return covered + (t - newest), t
    return covered, newest  # a few ms out of order: another writer's event
