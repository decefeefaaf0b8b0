"""Short human spellings of sizes, durations and rates, shared by every view."""

from __future__ import annotations

import math


def duration(seconds: float | None) -> str:
    """'1h02m', '3m05s', '42s' or '--'."""
    if seconds is None or not math.isfinite(seconds):
        return "--"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def number(value: float | None, digits: int = 4) -> str:
    """A loss-like number: '2.3456', 'NaN', 'inf' or '--'."""
    if value is None:
        return "--"
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.{digits}f}"


def rate(value: float | None) -> str:
    """Tokens per second: '1234', '12.3k' or '--'."""
    if value is None:
        return "--"
    return f"{value / 1000:.1f}k" if value >= 10_000 else f"{value:.0f}"
