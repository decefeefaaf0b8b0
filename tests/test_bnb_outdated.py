"""Issue 26 item 12: an outdated bitsandbytes is not called "not installed". transformers raises the same
words for a missing and an outdated install, so the advice names both and the version it needs."""

from __future__ import annotations

import pytest

from loratui import events
from loratui.logic.advisor import Advisor
from loratui.recipe import Recipe


def _first(line: str) -> str:
    advisor = Advisor(Recipe())
    advisor.feed(events.Output(t=1.0, stream="stderr", lines=[line]))
    (item,) = [i for i in advisor.items() if i.id == "bnb_setup"]
    return item.title


@pytest.mark.parametrize(("line", "version"), [
    ("ImportError: Using `bitsandbytes` 4-bit quantization requires bitsandbytes: "
     "`pip install -U bitsandbytes>=0.46.1`", "0.46.1"),
    ("ImportError: Using `bitsandbytes` 8-bit quantization requires the latest version of bitsandbytes: "
     "`pip install -U bitsandbytes`", None),
    ("ValueError: You have a version of `bitsandbytes` that is not compatible with 4bit inference and training. "
     "Make sure you have the latest version of `bitsandbytes` installed", None),
])
def test_an_outdated_install_is_not_called_missing(line: str, version: str | None) -> None:
    title = _first(line)
    assert "not installed" not in title and "older than" in title
    if version:
        assert f"pip install -U 'bitsandbytes>={version}'" in title


def test_no_module_is_still_not_installed() -> None:
    assert "bitsandbytes is not installed" in _first("ModuleNotFoundError: No module named 'bitsandbytes'")
