"""A number with a time unit, read from a person's or a program's text, in seconds: `0.9 s`, `400ms`, `2 hours`,
`1h 30m`, `20分钟`, `3秒`, and with `counts` spelled counts too (`a few minutes`, `half an hour`, `两个多小时`).

The one reader of durations in prose for the text advisor: each reader picks the units it means (a step is timed in
milliseconds and seconds, a dataset's preparation in minutes and hours) and gets the same spellings, the same
number and the same boundaries: no match inside an identifier or a version (`fp16s`, `v1.5h`), and no rate
(`2.5 s/it`). `clock_seconds` reads tqdm's clock (`1:02:03`) for every reader of a bar. `loratui.units.seconds`
is another thing: a Slurm time limit (`1h30m`) as a whole field. Pure: text in, matches and seconds out."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache

UNITS = {
    "ms": (0.001, ("milliseconds", "millisecond", "ms", "毫秒")),
    "s": (1.0, ("seconds", "second", "secs", "sec", "s", "秒")),
    "min": (60.0, ("minutes", "minute", "mins", "min", "分钟", "分")),
    "m": (60.0, ("m",)),
    "h": (3600.0, ("hours", "hour", "hrs", "hr", "h", "小时")),
    "d": (86400.0, ("days", "day", "天")),
}
"""Each unit's length in seconds and its spellings, English and Chinese. A bare `m` is a unit of its own, for a
reader of a run's time (`1h 30m`) alone: elsewhere it is as often millions (`5M samples`); a bare `d` is none."""
_SPELLED = {spelling: seconds for seconds, spellings in UNITS.values() for spelling in spellings}

NUMBER = r"\d+(?:\.\d+)?"
_BEFORE = r"(?<![A-Za-z0-9_.])"
"""Not inside an identifier or a version: `fp16s`, `v1.5h`, `x86_64s` are no durations."""
_AFTER = r"(?![A-Za-z0-9_/])"
"""The unit is a word of its own, and not over anything (`2.5 s/it`, `10 min/epoch`)."""
_AFTER_PER = r"(?![A-Za-z0-9_])(?!/(?:it|iter|step|s)\b)"
"""With `per`: a time over an epoch or a run counts (`45 min/epoch`), a tqdm bar's time per iteration does not."""

_HAN = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "几": 3}
_WORDS = {"half a": 0.5, "half an": 0.5, "a": 1, "an": 1, "a few": 3, "several": 3, "couple of": 2, "one": 1,
          "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
          "twelve": 12, "twenty": 20}
"""Spelled counts; `a few`, `several` and `几` read as three: a person's rough count, not a measure."""
_COUNT = (NUMBER + r"|half an?|an?|a few|several|couple of|one|two|three|four|five|six|seven|eight|nine|ten|"
          r"twelve|twenty|[一二两三四五六七八九十几]+")
_COUNT_TAIL = r"\s*(?:-\s*" + NUMBER + r"\s*)?(?:个)?(?:多)?"
"""A range's top (`10-20 min`: the count is its bottom) and Chinese measure words (`两个多小时`)."""
_HALF_HOUR = "半(?:个)?小时"


def _unit_alternation(units: str) -> str:
    spellings = [spelling for unit in units.split() for spelling in UNITS[unit][1]]
    return "|".join(sorted(spellings, key=len, reverse=True))


@cache
def pattern(units: str = "ms s min h", counts: bool = False, compound: bool = False,
            per: bool = False) -> re.Pattern[str]:
    """A duration in `units` (names from UNITS, space-separated), with groups `n` and `unit`; `counts`: spelled
    counts as well (and `半小时`, with no `n`); `compound`: a second, smaller part read with the first (`2 hours and
    10 minutes`, `1h 30m`), in groups `n2` and `unit2`; `per`: a time per epoch counts (`45 min/epoch`)."""
    unit = f"(?P<unit>{_unit_alternation(units)}){_AFTER_PER if per else _AFTER}"
    if counts:
        body = f"(?P<n>{_COUNT}){_COUNT_TAIL}{unit}|{_HALF_HOUR}"
        return re.compile(f"{_BEFORE}(?:{body})", re.I)
    body = f"{_BEFORE}(?P<n>{NUMBER})\\s*{unit}"
    if compound:
        smaller = " ".join(name for name in units.split() if UNITS[name][0] < UNITS["h"][0])
        body += (f"(?:\\s*(?:and\\s+)?(?P<n2>{NUMBER})\\s*(?P<unit2>{_unit_alternation(smaller)}){_AFTER})?")
    return re.compile(body, re.I)


def unit_words(units: str = "ms s min h") -> str:
    """The spellings of `units` as one regex alternation, longest first, to capture inside a larger pattern."""
    return _unit_alternation(units)


def spelled(units: str = "ms s min h") -> str:
    """A duration in `units` as regex text without groups, to set inside a larger pattern (`from 50 min to 12 min`)."""
    return f"{_BEFORE}{NUMBER}\\s*(?:{_unit_alternation(units)}){_AFTER}"


def unit_seconds(unit: str) -> float:
    """One unit's length in seconds, by any of its spellings (`mins`, `秒`, `MS`)."""
    return _SPELLED[unit.lower()]


def count(text: str) -> float:
    """A count in figures or words (`2.5`, `a few`, `half an`, `二十`, `几`); 0 when it is none of them."""
    text = text.strip().lower()
    if text[:1].isdigit():
        return float(text)
    if text[:1] in "一二两三四五六七八九十几":
        return _han(text)
    return _WORDS.get(text, 0.0)


def _han(n: str) -> float:
    """A Chinese count of up to 99 (`两`, `十`, `二十`, `几十`)."""
    tens, _, ones = n.partition("十")
    if "十" not in n:
        return _HAN.get(n[-1], 0)
    return _HAN.get(tens, 1 if not tens else 0) * 10 + _HAN.get(ones, 0)


def seconds(found: re.Match[str]) -> float:
    """A match of `pattern` in seconds, both parts of a compound one."""
    groups = found.re.groupindex
    if found.group("n") is None:
        return 1800.0  # 半小时, the one duration without a count
    total = count(found.group("n")) * unit_seconds(found.group("unit"))
    if "n2" in groups and found.group("n2") is not None:
        total += float(found.group("n2")) * unit_seconds(found.group("unit2"))
    return total


def durations(text: str, reader: re.Pattern[str]) -> Iterator[tuple[re.Match[str], float]]:
    """Each duration `reader` (a `pattern`) finds in the text, in order, with its seconds."""
    for found in reader.finditer(text):
        yield found, seconds(found)


def all_seconds(text: str, reader: re.Pattern[str]) -> list[float]:
    """Each duration's seconds, in order."""
    return [value for _, value in durations(text, reader)]


def clock_seconds(clock: str) -> int:
    """A clock as tqdm prints its elapsed and remaining time (`1:02:03`, `17:19`, `05`) in seconds; an empty part
    (a clock cut short) counts as 0."""
    total = 0
    for part in clock.split(":"):
        total = total * 60 + (int(part) if part.isdigit() else 0)
    return total
