"""A pasted NaN whose text gives the learning rate: the advice names that value (trial 7: "nan after about 200 steps
with fp16, lr 2e-4" was told "loratui does not know its value")."""

from __future__ import annotations

import pytest

from loratui.logic.advisor import Advisor
from loratui.logic.advisor.nan_text import learning_rate
from loratui.logic.text_reader import TextReader


@pytest.mark.parametrize(("line", "lr"), [
    ("my loss goes to nan after about 200 steps with fp16, lr 2e-4, llama 7b qlora", 2e-4),
    ("loss becomes NaN with learning_rate=0.0002 and bf16", 2e-4),
    ("learning rate of 1e-5 and the loss is nan", 1e-5),
    ("学习率 3e-4，训练到一半 loss 变成 nan", 3e-4),
    ("loss nan, lr: 5E-05", 5e-5),
])
def test_the_learning_rate_a_line_says(line: str, lr: float) -> None:
    assert learning_rate(line) == pytest.approx(lr)


@pytest.mark.parametrize("line", ["loss is nan with lr scheduler cosine", "lr 0 and the loss is nan",
                                  "loss nan after the lr warmup reached 100%", "nan loss, no idea why"])
def test_no_learning_rate_where_none_is_said(line: str) -> None:
    assert learning_rate(line) is None


def _first(text: str):  # noqa: ANN202 - the advisor's first item
    advisor, reader = Advisor(None, pasted=True), TextReader(stream="stderr")
    for line in text.splitlines():
        advisor.feed_all(reader.feed(line))
    advisor.feed_all(reader.close())
    return advisor.items()[0]


def test_a_pasted_nan_names_the_learning_rate_its_text_gives() -> None:
    first = _first("my loss goes to nan after about 200 steps with fp16, lr 2e-4, llama 7b qlora. what should I do?")
    assert first.id == "nan_loss" and "the text said 0.0002" in first.title, first.title
    assert "does not know" not in first.title


def test_a_pasted_nan_without_a_rate_still_says_loratui_does_not_know_it() -> None:
    first = _first("my loss goes to nan after about 200 steps, what should I do?")
    assert first.id == "nan_loss" and "loratui does not know its value" in first.title, first.title
