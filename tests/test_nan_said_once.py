"""The NaN reader of the advisor's text watch reads a NaN line's loss and bar once each (it read them twice: once
to tell a logged NaN, which the loss watch reads, and again for the line's own step); what it finds is unchanged."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

from loratui.logic.advisor import text as advisor_text
from loratui.logic.text_reader import progress, values

LINES = [
    "step 11: loss is nan, skipping this batch",  # said, no bar: the loss line read for the step
    "Epoch 3:  45%|████▌     | 450/1000 [01:20<01:38,  5.58it/s, loss=nan, v_num=3]",  # a bar: its step
    "step 120 | loss nan | lr 1e-4",  # a logged NaN: left to the loss watch
]


def _counting(module: Any, names: tuple[str, ...], calls: Counter[str]) -> SimpleNamespace:
    """`module` as the text watch sees it, with the real `names` counted."""
    def counted(name: str) -> Any:
        real = getattr(module, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return real(*args, **kwargs)
        return call
    return SimpleNamespace(**{n: counted(n) if n in names else getattr(module, n)
                              for n in dir(module) if not n.startswith("__")})


@pytest.mark.parametrize("line", LINES)
def test_a_nan_line_is_parsed_once(line: str, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = advisor_text.TextWatch()._nan_said(line, 7)
    calls: Counter[str] = Counter()
    monkeypatch.setattr(advisor_text, "progress", _counting(progress, ("find_bar",), calls))
    monkeypatch.setattr(advisor_text, "values", _counting(values, ("loss_line", "line_step"), calls))
    assert advisor_text.TextWatch()._nan_said(line, 7) == expected
    assert calls and max(calls.values()) == 1, calls
