"""Clauses and denials in a person's words: the one clause splitter and the one denial reader of every reader of
prose (the data's feed said slow, its preparation measured, a phase named, a NaN said, an OOM said).

A clause ends at a sentence's or a clause's punctuation, English or Chinese (a period inside a number, `0.5` or
`v1.5`, is none), at a line's end, or where the sentence turns (`but`, `whereas`, `although`, `though`, `yet`, `但是`,
`可是`, `而`): what one clause says of a thing, the next may deny or say of another (`tokenization takes 20 minutes,
but training is fast`). A bare `while` is no turn: `it freezes while loading the next batch` is one statement.
Pure: text in, pieces out."""

from __future__ import annotations

import re

_STOPS = r"(?<!\d)\.(?!\d)|[;:!?。！？；，：\n]"
_TURNS = r"\b(?:but|whereas|although|though|yet)\b|但是?|可是|而"
CLAUSE = re.compile(f"{_STOPS}|,|{_TURNS}")
"""Where a clause ends: the break itself, to split on or to find."""
PHRASES = re.compile(rf"{_STOPS}|,\s*(?:while|and then)\b|{_TURNS}")
"""CLAUSE but for a comma the sentence does not turn at: a reader that finds a thing and a verdict on it in one clause
(starve_words) reads an opening phrase with what follows it (`With augmentations on, everything crawls`)."""


SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*|\n")
"""Where a sentence ends: after its stop, kept with it (`Is it slow?` stays a question), an English one before
white space (`0.5`, `v1.5`, `e.g.x` end nothing), a Chinese one anywhere; and a line's end."""


CJK = "\u3400-\u9fff\uf900-\ufaff"
"""Chinese characters (the unified ideographs, extension A and the compatibility block), for a character class."""
_UNSPACED = CJK + "\u3040-\u30ff\uac00-\ud7af"
"""Chinese characters, Japanese kana and Korean syllables: scripts whose writers put no space before a Latin word
(`训练时loss不降`, `GPUメモリ`, `loss가 안 떨어져요`)."""
_CJK_EDGE = re.compile(f"(?<=[{_UNSPACED}])(?=[A-Za-z0-9])|(?<=[A-Za-z0-9])(?=[{_UNSPACED}])")
"""Where such a character touches a Latin letter or digit (`显存fragmentation的问题`): both are word characters, so
no word boundary falls there until a space is put in."""


def cjk_spaced(text: str) -> str:
    """The text with a space wherever Chinese, kana or Hangul touches Latin letters or digits, so word boundaries
    fall there (writers put one there or not: `训练时 loss 不降` / `训练时loss不降`, `loss가`)."""
    return _CJK_EDGE.sub(" ", text)


def sentences(text: str) -> list[str]:
    """The text's sentences, in order, each with its stop; the empty ones left out."""
    return [sentence for sentence in SENTENCE.split(text) if sentence.strip()]


def clauses(text: str, splitter: re.Pattern[str] = CLAUSE) -> list[str]:
    """The text's clauses, in order, the empty ones left out."""
    return [clause for clause in splitter.split(text) if clause.strip()]


def clause_starts(text: str) -> list[int]:
    """Where each clause of the text starts: 0, then just after each break."""
    return [0] + [found.end() for found in CLAUSE.finditer(text)]


NEGATION = r"\b(?:not|never|no longer)\b|n't\b"
"""An English denial: `not`, `never`, `no longer`, and every `n't` (`isn't`, `doesn't`, `wasn't`)."""
DENIED = re.compile(NEGATION + r"|[不没]", re.IGNORECASE)
"""A denial in English or Chinese (`不`, `没`): the words beside it say what is not so."""


def denial(more: str = "", chinese: str = "[不没]") -> re.Pattern[str]:
    """DENIED with `more` words that deny in a reader's own context, or with other Chinese where `不` alone would
    deny what the reader looks for."""
    return re.compile("|".join(part for part in (NEGATION, more, chinese) if part), re.IGNORECASE)
