"""R36 (thirtieth session): an OOM a person tells in their own words, as a sentence that names the card's memory and
its running short in any order (`the GPU memory is overflow`, `a batch of 64 exceeds my GPU memory`), read as an OOM of
the card; denied or conditional (`to avoid exceeding the GPU memory`) or a full card that runs fine, not. The texts
are ours."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream
from loratui.logic.categories import answer_category


def _answer(text: str) -> str:
    return answer_category(diagnose_stream(io.BytesIO(text.encode()), "pasted", guess=False)[0])


@pytest.mark.parametrize("text", [
    "During training I found the GPU memory is overflow after a few hundred steps.\n",
    "It seems that a batch of 64 exceeds my GPU memory, so I wonder how you trained it.\n",
    "Just building the graph of 50k nodes consumes all memory on a V100.\n",
    "The model is too large to train at this resolution on a GPU with 12GB memory.\n",
    "训练到第二个epoch就提示显存溢出\n",
])
def test_the_cards_memory_running_short_in_a_persons_words_is_an_oom(text: str) -> None:
    assert _answer(text) == "oom_full", text


@pytest.mark.parametrize("text", [
    "I lowered the batch size to avoid exceeding the GPU memory. The loss goes down nicely.\n",
    "GPU memory usage is full at 24GB but training runs fine, is that normal?\n",
    "The VRAM is 24GB and training is stable.\n",
])
def test_no_oom_where_the_card_did_not_run_short(text: str) -> None:
    assert _answer(text) != "oom_full", text
