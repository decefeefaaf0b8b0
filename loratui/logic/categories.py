"""The doctor's answer as one of the corpus's 15 categories (issue 23): the first item's advice id, or `healthy` when
nothing it says is a problem. The corpus test and the bench scripts score by it; a guess of a category is given its
advice id by it."""

from __future__ import annotations

from typing import Any

CATEGORY = {"loss_flat": "loss_flat_or_zero", "loss_zero": "loss_flat_or_zero", "exception": "exception_other",
            "nccl_error": "exception_other"}
"""Advice ids whose corpus category has another name; every other id is its own category. NCCL's own failures (no
timeout) are the setup's or the launch's error in the corpus' terms (`unhandled system error` fixed by --ipc=host,
`Duplicate GPU detected` by one device per rank): of the dev excerpts whose first item was NCCL's failure, 8 were
settled as such, 2 as a hang, none as a CUDA error."""
ADVICE_ID = {"loss_flat_or_zero": "loss_flat", "exception_other": "exception"}
"""The advice id a guess of a category is given (the other way round)."""


def answer_category(items: list[Any]) -> str:
    """The category the doctor's first item names; `healthy` when it has no error or warning (a slow loader's
    finding first is one, whatever its severity)."""
    if not any(item.severity in ("error", "warning") for item in items) and not (
            items and items[0].id == "data_starved"):
        return "healthy"
    return CATEGORY.get(items[0].id, items[0].id)
