"""The live panel's "Loss is rising" stayed up for good once a rise was found, though the loss came back below where
it rose from and trained on (the advisor keeps the first finding of each id): the evidence no longer held. The rise
now says it came back (a note, nothing to apply) once the last 3 logs after it sit within a sixth of its start; a
later rise is news again (a warning), and a rise that ran into a NaN stays the error it is."""

from __future__ import annotations

import random

from loratui import events
from loratui.logic.advisor import Advisor


def _series(*legs: tuple[float, float, int]) -> list[float]:
    """Losses moving from each leg's start to its end over its logs, with a little noise."""
    rng, out = random.Random(0), []
    for start, end, n in legs:
        out += [start + (end - start) * i / n + rng.uniform(-0.02, 0.02) for i in range(n)]
    return out


def _fed(losses: list[float]) -> tuple[Advisor, dict[int, list[tuple[str, str]]]]:
    advisor, seen = Advisor(None), {}
    advisor.feed(events.Header(t=0, schema=1, run_id="r", recipe_hash="h", command=["python", "loop.py"]))
    advisor.feed(events.TrainBegin(t=0, max_steps=0, num_epochs=0.0))
    for step, loss in enumerate(losses, 1):
        advisor.feed(events.Log(t=step, step=step, values={"loss": round(loss, 4)}))
        seen[step] = [(a.severity, a.title) for a in advisor.items() if a.id == "loss_diverging"]
    return advisor, seen


def test_a_rise_the_loss_came_back_from_is_no_standing_warning() -> None:
    rise_end = 60 + 24
    losses = _series((3.0, 1.8, 60), (1.8, 3.0, 24), (3.0, 1.64, 17), (1.6, 1.5, 60))
    advisor, seen = _fed(losses)
    assert seen[rise_end] and seen[rise_end][0][0] == "warning" and "rising" in seen[rise_end][0][1]
    ((severity, title),) = seen[len(losses)]
    assert severity == "info" and "came back" in title, title
    (advice,) = [a for a in advisor.items() if a.id == "loss_diverging"]
    assert not advice.change  # nothing to apply for a loss that recovered
    # ... and a later rise is a warning again
    _, again = _fed(losses + _series((1.5, 3.5, 30)))
    assert again[len(losses) + 30][0][0] == "warning" and "rising" in again[len(losses) + 30][0][1]


def test_a_rise_that_ran_into_a_nan_stays_an_error() -> None:
    losses = _series((3.0, 1.8, 60), (1.8, 3.0, 24))
    advisor, _ = _fed(losses)
    advisor.feed(events.Log(t=85, step=85, values={"loss": "nan"}))
    for step, loss in enumerate(_series((1.6, 1.5, 20)), 86):
        advisor.feed(events.Log(t=step, step=step, values={"loss": round(loss, 4)}))
    (advice,) = [a for a in advisor.items() if a.id == "loss_diverging"]
    assert advice.severity == "error" and "came back" not in advice.title
