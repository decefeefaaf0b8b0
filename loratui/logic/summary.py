"""The JSON summary of a run that `loratui replay RUN --headless --summary` prints."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from loratui import events
from loratui.logic.runstate import RunState
from loratui.units import GIB


def summarize(state: RunState, contents_notes: str, diagnoses: Sequence[str] = (),
              advice: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run's headline facts as JSON-safe values (non-finite losses as "NaN"/"Infinity" strings);
    `advice`: the advisor's first item (`advisor.render.first_advice`), the line every surface shows first."""
    finite = [(step, loss) for step, loss in state.loss if math.isfinite(loss)]
    best = min(finite, key=lambda point: point[1]) if finite else None
    return {
        "run_id": state.run_id,
        "name": state.name,
        "steps": state.step,
        "max_steps": state.max_steps,
        "first_loss": events.num_out(state.loss[0][1]) if state.loss else None,
        "last_loss": events.num_out(state.loss[-1][1]) if state.loss else None,
        "min_loss": best[1] if best else None,
        "min_loss_step": best[0] if best else None,
        "nan_steps": list(state.nan_steps),
        "eval_points": [[step, events.num_out(loss)] for step, loss in state.eval_loss],
        "peak_device_used_gib": _gib(state.device_used_peak),
        "peak_torch_reserved_gib": _gib(state.peak_reserved),
        "duration_s": round(state.elapsed_s, 3) if state.elapsed_s is not None else None,
        # of which suspended: a requeued Slurm job waiting in the queue, a suspend waiting for resume
        "waiting_s": round(state.waiting_s, 3) if state.waiting_s is not None else None,
        # of which paused (held at `p` or `loratui pause` until resumed)
        "paused_s": round(state.pausing_s, 3) if state.pausing_s is not None else None,
        # the time it ran: the duration less its waiting and pauses
        "run_s": round(state.run_s, 3) if state.run_s is not None else None,
        "end_state": state.end.state if state.end else state.state,
        "end_error": state.end.error if state.end else "",
        "skipped": contents_notes,
        "diagnoses": list(diagnoses),
        "advice": advice,
    }


def _gib(value: int | None) -> float | None:
    """Bytes as GiB to 3 places; None when nothing was measured."""
    return round(value / GIB, 3) if value else None


def diagnose(found: Iterable[Any], recipe: Any = None) -> list[str]:
    """Ids of the advice the advisor gives after all of `found`; [] while there is no advisor."""
    try:
        from loratui.logic.advisor import Advisor
    except ImportError:
        return []
    advisor = Advisor(recipe)
    for event in found:
        advisor.feed(event)
    return [item.id for item in advisor.items()]
