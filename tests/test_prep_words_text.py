"""The data's preparation named in words, and a bar of it, one notion each (loratui/logic/advisor/prep_words.py), for
the readers that look for it: prep_timeout, starve, starve_measured and the text reader's preprocessing bar."""

from __future__ import annotations

import re

import pytest

from loratui.logic.advisor.prep_words import NAMED_HINTS, PREP_NAMED, PREP_WORK, WORK_HINTS, cut_bar, prep_bar

NAMED = re.compile(PREP_NAMED, re.I)
WORK = re.compile(PREP_WORK, re.I)

NAMED_SAYINGS = ["tokenization takes forever", "the BPE step", "packing is slow", "packed the samples",
                 "preprocessing the corpus", "pre-process step", "dataset.map(tokenize)", "the map() call",
                 "the map function hangs", "map 很慢", "Running tokenizer on dataset", "Grouping texts in chunks of 1024",
                 "数据预处理太慢", "分词要一个小时", "处理数据很久", "数据加载", "样本的处理很慢"]
WORK_SAYINGS = ["loading the dataset", "reading my data", "caching the dataset", "building the corpus",
                "processing 130k samples", "preparing the data", "the dataset loading", "data set prep"]


@pytest.mark.parametrize("said", NAMED_SAYINGS)
def test_the_preparation_named(said: str) -> None:
    assert NAMED.search(said) and WORK.search(said)


@pytest.mark.parametrize("said", WORK_SAYINGS)
def test_work_on_the_data_set_counts_where_a_reader_asks(said: str) -> None:
    assert WORK.search(said) and not NAMED.search(said)


@pytest.mark.parametrize("said", ["mAP is 0.41", "loading the model", "loading checkpoint shards", "the Map of Europe",
                                  "saving the weights"])
def test_other_work_is_no_preparation(said: str) -> None:
    assert not WORK.search(said)


@pytest.mark.parametrize("said", NAMED_SAYINGS + WORK_SAYINGS)
def test_every_saying_holds_a_hint(said: str) -> None:
    """The hints gate the patterns on every line of a log: a saying without one would never be read."""
    low = said.lower()
    assert any(hint in low for hint in WORK_HINTS)
    if NAMED.search(said):
        assert any(hint in low for hint in NAMED_HINTS)


@pytest.mark.parametrize(("desc", "unit", "expected"), [
    ("Map (num_proc=16)", "examples/s", True), ("Tokenizing eval dataset", "it/s", True),
    ("Caching images", "it/s", True), ("", "ba/s", True), ("Loading checkpoint shards", "s/it", False),
    ("Downloading data", "examples/s", False), ("", "s/it", False), ("Epoch 1", "it/s", False),
])
def test_a_bar_of_the_preparation(desc: str, unit: str, expected: bool) -> None:
    assert prep_bar(desc, unit) is expected


def test_a_cut_bar_is_judged_by_its_description() -> None:
    assert cut_bar("Map (num_proc=16):  41%|████      | 41000/100000 [35:02<50:10, 19.5Traceback (most recent")
    assert not cut_bar(" 41%|████      | 410/1000 [45:02<50:10,  6.5Traceback (most recent call last):")
    assert cut_bar("Running tokenizer on dataset:  38%|███▊      | 32068/85249 [32:13<53:59, 16.42ba/s]")
