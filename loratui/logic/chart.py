"""Text charts for the panes: multi-row sparklines with a horizontal threshold line.

Pure functions from values to rows of characters; the widgets only colour them. Values are reduced to
the chart's width by taking each column's maximum, so a spike always survives (see series.bucket_max).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from loratui.logic.series import bucket_max

BLOCKS = " ▁▂▃▄▅▆▇█"
LINE = "─"
CROSS = "━"


@dataclass(frozen=True)
class Chart:
    """Rows top to bottom; `line_row` is the row of the threshold (or None); `over[i]` marks columns above it."""

    rows: list[str]
    line_row: int | None
    over: list[bool]


def sparkline(values: Sequence[float], width: int, height: int, top: float,
              threshold: float | None = None) -> Chart:
    """Draw `values` (most recent last) right-aligned in `width` columns and `height` rows, 0..`top`."""
    width, height = max(1, width), max(1, height)
    columns = bucket_max(list(values), width)
    columns = [math.nan] * (width - len(columns)) + columns
    levels = height * 8
    top = top if top > 0 else 1.0
    line_row = None
    if threshold is not None and 0 < threshold <= top:
        # The row whose band contains the threshold, counted from the top.
        line_row = height - 1 - min(height - 1, int(threshold / top * height - 1e-9))
    filled = [_level(v, top, levels) for v in columns]
    rows = []
    for r in range(height):
        floor = (height - 1 - r) * 8
        chars = []
        for level in filled:
            part = min(8, max(0, level - floor))
            if r == line_row:
                # The threshold stays visible across the bars that cross it.
                chars.append(LINE if part < 8 else CROSS)
            else:
                chars.append(BLOCKS[part])
        rows.append("".join(chars))
    over = [threshold is not None and not math.isnan(v) and v > threshold for v in columns]
    return Chart(rows, line_row, over)


def _level(value: float, top: float, levels: int) -> int:
    if math.isnan(value) or value <= 0:
        return 0
    return max(1, min(levels, round(value / top * levels)))


def bar(fraction: float, width: int) -> str:
    """A progress bar of `width` cells with eighth-cell resolution."""
    fraction = min(1.0, max(0.0, fraction))
    eighths = int(round(fraction * width * 8))
    full, part = divmod(eighths, 8)
    text = "█" * full + ("▏▎▍▌▋▊▉"[part - 1] if part else "")
    return text.ljust(width, "·")[:width]


def column_spans(xs: Sequence[float], width: int) -> list[tuple[float, float] | None]:
    """The (first x, last x) each chart column covers, aligned as `sparkline` aligns values."""
    n = len(xs)
    if n == 0:
        return [None] * max(1, width)
    if n <= width:
        spans: list[tuple[float, float] | None] = [(x, x) for x in xs]
    else:
        spans = [(xs[b * n // width], xs[max((b + 1) * n // width, b * n // width + 1) - 1]) for b in range(width)]
    return [None] * (width - len(spans)) + spans


def intervals(phases: Sequence[tuple[float, str, str, int]], names: frozenset[str],
              until: float) -> list[tuple[float, float]]:
    """Time intervals of the named phases (begin..end; a phase still open runs to `until`)."""
    out, open_at = [], {}
    for t, name, edge, _ in phases:
        if name not in names:
            continue
        if edge == "begin":
            open_at[name] = t
        elif name in open_at:
            out.append((open_at.pop(name), t))
    out.extend((t, until) for t in open_at.values())
    return out


def marked_columns(spans: Sequence[tuple[float, float] | None], marks: Sequence[tuple[float, float]],
                   pad: float = 0.0) -> list[bool]:
    """Which columns overlap any of `marks` (widened by `pad` seconds: a 50 ms save still shows)."""
    return [span is not None and any(lo - pad <= span[1] and span[0] <= hi + pad for lo, hi in marks)
            for span in spans]
