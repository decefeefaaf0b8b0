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
    if value and abs(value) < 0.5 * 10.0**-digits:
        return f"{value:.2g}"  # a GRPO loss of 3e-8 is not '0.0000', nor -3e-8 '-0.0000'
    return f"{value:.{digits}f}"


def rate(value: float | None) -> str:
    """Tokens per second: '1234', '12.3k' or '--'."""
    if value is None:
        return "--"
    return f"{value / 1000:.1f}k" if value >= 10_000 else f"{value:.0f}"


def count(n: int, word: str, many: str = "") -> str:
    """'1 line', '2 lines' (`many` for an irregular plural)."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def article(spoken: str) -> str:
    """'a' or 'an' before a number or word as it is said aloud: an 8 GiB card, an 11 GiB card, a 24."""
    head = spoken.lstrip()
    digits = head.split(".")[0].replace(",", "")
    if digits.isdigit():  # eight, eleven, eighteen, eighty..., eight hundred...
        return "an" if digits.startswith("8") or (digits[:2] in ("11", "18") and len(digits) % 3 == 2) else "a"
    return "an" if head[:1].lower() in tuple("aeio") else "a"


QUOTE_WIDTH = 300
"""How much of one line of the input a piece of advice quotes."""


def quoted(line: str, width: int = QUOTE_WIDTH) -> str:
    """One line of the input as advice quotes it: stripped, and past `width` characters cut at a word's end near
    there (else where it is) and marked with '…', so a reader sees a quote stops short (a bare `[:300]` ended one
    mid-word with nothing to say so: `... reducing in a stable fas`)."""
    text = line.strip()
    if len(text) <= width:
        return text
    cut = text[:width - 1]
    space = cut.rfind(" ")
    if space >= width - 40:
        cut = cut[:space]
    return cut.rstrip() + "…"


def clip(text: str, width: int) -> str:
    """`text` in at most `width` characters: cut at a word's end where one is near, marked with '…'."""
    if len(text) <= width:
        return text
    cut = text[:width - 1]
    space = cut.rfind(" ")
    if space >= width * 2 // 3:  # a word boundary not too far back
        cut = cut[:space]
    return cut.rstrip() + "…"
