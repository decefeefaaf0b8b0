"""Loss health read from printed series in many layouts (issue 23): the doctor judges the numbers a log prints, in
whatever layout it prints them, and a healthy series in any layout raises nothing. The series are built here from
the pattern (a descent to a plateau with noise, epochs, a tail), not copied from a corpus excerpt."""

from __future__ import annotations

import io
import math
import random

import pytest

from loratui.commands.doctor import diagnose_stream


def first(text: str) -> str:
    """The id of the doctor's first warning or error, `healthy` when it has none."""
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    bad = [i for i in items if i.severity in ("error", "warning")]
    return bad[0].id if bad else "healthy"


def plain(losses: list[float], start: int = 0, every: int = 10) -> str:
    return "".join(f"step {start + every * i} loss {v:.4f} lr 0.0002\n" for i, v in enumerate(losses))


def epochs(losses: list[float]) -> str:
    return "".join(f"Epoch {i} loss: {v:.4f} - acc: 0.5\n" for i, v in enumerate(losses))


def descent(n: int, noise: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [(1.2 + 2.0 * math.exp(-i / (n / 4))) * (1 + noise * rng.gauss(0, 1)) for i in range(n)]


# -- a counter at 0 is no loss of 0 --------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", [plain, epochs])
@pytest.mark.parametrize("n", [5, 12, 40])
def test_a_series_that_starts_at_step_or_epoch_0_is_not_a_zero_loss(layout, n: int) -> None:
    """`step 0 loss 3.6815` is the loss at step 0: the words reader took `0 loss` for `got 0 loss`."""
    assert first(layout(descent(n, 0.02, n))) == "healthy"


@pytest.mark.parametrize("line", [
    "rank 0 loss 2.1034 step 5",
    "[iter 0] loss = 3.1250",
    "batch 0 loss: 0.6931 acc 0.51",
])
def test_a_counter_at_0_before_a_loss_is_not_said_zero(line: str) -> None:
    assert first(line) != "loss_zero"


@pytest.mark.parametrize("text", [
    "some users got 0 loss with this config",
    "I get 0 loss after step 100",
    "at epoch 3 the training loss is 0",
])
def test_a_loss_said_to_be_zero_still_is(text: str) -> None:
    assert first(text) == "loss_zero"
