"""Issue 23: what a series pasted with no names is, and what a person says the loss does, read by the mechanism
rather than the excerpt's words (ruleprose6). Lines quoted from dev records name their source; the others are other
wordings of the same mechanism; negatives keep their answers."""

from __future__ import annotations

import io

import pytest

from loratui import events
from loratui.commands.doctor import diagnose_stream
from loratui.logic.text_reader import TextReader


def first_id(text: str) -> str:
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return items[0].id if items else ""


def logged(text: str) -> list[float]:
    reader = TextReader()
    found = [e for line in text.splitlines(keepends=True) for e in reader.feed(line)] + reader.close()
    return [e.values["loss"] for e in found if isinstance(e, events.Log)]


# -- a running total is no loss column -------------------------------------------------------------------------

GPT2_BPE = ("That means, BPE takes a long time. Here is a quick benchmark in my 4th gen i7 CPU:\n```\n"
            "0     0.002872943878173828\n100     0.2857849597930908\n200     0.46935296058654785\n"
            "300     0.7295417785644531\n400     0.8204867839813232\n500     0.965552806854248\n"
            "600     1.0516178607940674\n700     1.1927227973937988\n800     1.3081107139587402\n"
            "900     1.354628086090088\n1000     1.4476778507232666\n```\nthe first column is the iteration number and "
            "the second one is elapsed time. 1000 iteration takes 1.44 seconds.\n")
"""https://github.com/huggingface/transformers/issues/1621 (dev): read as a loss rising 0.0096 -> 0.72 before."""


@pytest.mark.parametrize("text", [
    GPT2_BPE,
    "step  seconds\n10 0.41\n20 0.83\n30 1.22\n40 1.65\n50 2.04\n",  # wall-clock seconds since the start
    "0 0.0\n1000 12.5\n2000 25.1\n3000 37.4\n",  # tokens seen, in millions
    "5 0.013\n10 0.027\n15 0.041\n20 0.052\n25 0.068\n",  # hours elapsed
])
def test_a_column_that_starts_near_zero_and_only_grows_is_a_running_total(text: str) -> None:
    """A loss starts high and falls (or wanders); a bare column that starts near zero and grows at every row is a
    running total (elapsed time, tokens or samples seen), not a loss."""
    assert logged(text) == []


@pytest.mark.parametrize("text", [
    "76930 2.6496577\n76940 2.59109\n76950 2.596339\n76960 2.735384\n",  # prajdabre/yanmtt#7: a loss column
    "100 2.10\n200 3.40\n300 5.90\n400 9.80\n",  # a loss that climbs from where a loss starts
    "10 0.90\n20 0.50\n30 0.31\n40 0.22\n",
])
def test_a_loss_column_still_reads(text: str) -> None:
    assert len(logged(text)) == 4


def test_the_doctor_reads_the_bpe_benchmark_as_slow_preprocessing() -> None:
    assert first_id(GPT2_BPE) == "data_starved"
