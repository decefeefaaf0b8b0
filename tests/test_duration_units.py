"""The one reader of durations in prose (loratui/logic/durations.py): a number with a time unit, in seconds, for every
reader of the text advisor that times something (a step, a dataset's preparation, a run, an epoch)."""

from __future__ import annotations

import re

import pytest

from loratui.logic import durations


def read(text: str, units: str = "ms s min h d", **options: bool) -> list[float]:
    return durations.all_seconds(text, durations.pattern(units, **options))


@pytest.mark.parametrize(("text", "expected"), [
    ("400ms", 0.4), ("400 milliseconds", 0.4), ("1 millisecond", 0.001), ("400毫秒", 0.4),
    ("3s", 3), ("3 sec", 3), ("3 secs", 3), ("1 second", 1), ("3 seconds", 3), ("3秒", 3),
    ("5min", 300), ("5 mins", 300), ("1 minute", 60), ("5 minutes", 300), ("20分钟", 1200), ("20分", 1200),
    ("2h", 7200), ("2 hr", 7200), ("2 hrs", 7200), ("1 hour", 3600), ("2 hours", 7200), ("2小时", 7200),
    ("1 day", 86400), ("2 days", 172800), ("2天", 172800),
])
def test_each_unit_in_each_spelling(text: str, expected: float) -> None:
    assert read(text) == [pytest.approx(expected)]


def test_units_are_read_in_any_case() -> None:
    assert read("400MS, 3 Seconds, 2 HOURS") == [pytest.approx(0.4), 3, 7200]
    assert durations.unit_seconds("Mins") == 60


def test_decimals() -> None:
    assert read("0.25 s then 1.5h then 2.75 min") == [0.25, 5400, 165]


def test_chinese_text_around_the_number() -> None:
    """Chinese characters may touch the number on either side: they are no identifier."""
    assert read("数据加载耗时2秒，前向传播0.1秒") == [2, 0.1]


def test_a_reader_takes_only_the_units_it_names() -> None:
    assert read("400 ms, 3 s, 2 min, 1 h", units="ms s") == [pytest.approx(0.4), 3]
    assert read("400 ms, 3 s, 2 min, 1 h", units="min h") == [120, 3600]


@pytest.mark.parametrize("text", ["fp16s", "v1.5h", "x86_64s", "version 1.2.3s", "llama3s", "ckpt_10min",
                                  "sm_80s", "10minutes_per_step", "3 hoursago"])
def test_no_duration_inside_an_identifier_or_a_version(text: str) -> None:
    assert read(text) == []


def test_a_time_over_something_is_not_a_duration_unless_asked() -> None:
    assert read("2.5 s/it and 10 min/epoch") == []
    assert read("2.5 s/it and 45 min/epoch", per=True) == [2700]


def test_a_bare_m_is_minutes_only_where_asked() -> None:
    """`5M samples` is five million, in any reader but a run's time (`1h 30m`)."""
    assert read("5M samples") == []
    assert read("took 30m", units="s m min h") == [1800]


def test_a_compound_duration_reads_as_one() -> None:
    assert read("2 hours and 10 minutes, then 1h 30m", units="s m min h", compound=True) == [7800, 5400]
    assert read("2 hours and 10 minutes") == [7200, 600]


@pytest.mark.parametrize(("text", "expected"), [
    ("a few minutes", 180), ("half an hour", 1800), ("an hour", 3600), ("several hours", 10800),
    ("couple of days", 172800), ("twenty minutes", 1200), ("two hours", 7200),
    ("两个多小时", 7200), ("二十分钟", 1200), ("十分钟", 600), ("几十分钟", 1800), ("半小时", 1800), ("半个小时", 1800),
])
def test_spelled_counts_where_asked(text: str, expected: float) -> None:
    assert read(text, counts=True) == [expected]
    assert read(text) == []


def test_a_range_reads_as_its_bottom_where_counts_are_asked() -> None:
    """`10-20 min` with counts is its bottom (a preparation said to take at least that); without, its top alone
    is a number with a unit."""
    assert read("10-20 min", counts=True) == [600]
    assert read("10-20 min") == [1200]


def test_a_spelled_count_is_a_word_of_its_own() -> None:
    """`extra hour` holds no `a hour`, `often minutes` no `ten minutes`."""
    assert read("an extra hour, often minutes", counts=True) == []


def test_spelled_sets_a_duration_inside_a_larger_pattern() -> None:
    moved = re.compile(r"from " + durations.spelled("s min h") + r" to " + durations.spelled("s min h"), re.I)
    assert moved.search("epoch time went from 50 min to 12 min")
    assert not moved.search("epoch time went from 50 fp16s to 12 min")


@pytest.mark.parametrize(("clock", "expected"), [("1:02:03", 3723), ("17:19", 1039), ("05", 5), ("00:00", 0),
                                                 ("100:00:00", 360000), ("1:", 60)])
def test_a_tqdm_clock_in_seconds(clock: str, expected: int) -> None:
    """tqdm's elapsed and remaining time, one reader for the text reader's bars, an open bar and the timeout's."""
    assert durations.clock_seconds(clock) == expected
