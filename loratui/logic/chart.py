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
