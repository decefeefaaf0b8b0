"""One reader of a stated learning rate (values.stated_learning_rate): a log line's `lr` and a pasted NaN's are read
alike. Before, the loss-line reader missed `lr 2e-4` with only a space, `学习率: 3e-4` and `learning-rate=1e-5` that
the NaN advice read, and the NaN advice missed `lr: tensor(2e-4)` that the loss line read."""

from __future__ import annotations

import pytest

from loratui.logic.advisor.nan_text import learning_rate
from loratui.logic.text_reader.values import loss_line, stated_learning_rate

SAID = [("lr 2e-4", 2e-4), ("lr: 5E-05", 5e-5), ("learning_rate=0.0002", 2e-4), ("learning-rate=1e-5", 1e-5),
        ("学习率: 3e-4", 3e-4), ("lr: tensor(2e-4)", 2e-4), ("learning rate of 1e-5", 1e-5)]


@pytest.mark.parametrize(("said", "lr"), SAID)
def test_a_log_line_and_a_pasted_nan_read_the_same_learning_rate(said: str, lr: float) -> None:
    assert stated_learning_rate(said) == pytest.approx(lr)
    assert loss_line(f"step 7 | loss: 2.31 | {said} |") == (7, {"loss": 2.31, "learning_rate": pytest.approx(lr)})
    assert learning_rate(f"the loss turns nan at step 7, {said}") == pytest.approx(lr)


def test_a_logged_zero_is_a_value_a_pasted_zero_is_no_learning_rate() -> None:
    """Warmup logs lr 0 (the advice counts such logs); a paste's `lr 0` names no rate to lower."""
    assert loss_line("step 0 loss: 2.5 lr: 0.0") == (0, {"loss": 2.5, "learning_rate": 0.0})
    assert learning_rate("lr 0 and the loss is nan") is None


@pytest.mark.parametrize("line", ["lr scheduler cosine", "the lr warmup reached 100%", "lr=2e-4*8", "flr: 0.1"])
def test_no_learning_rate_where_none_is_stated(line: str) -> None:
    assert stated_learning_rate(line) is None
