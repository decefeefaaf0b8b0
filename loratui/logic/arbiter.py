"""The arbiter between the rules' answer and the words (issue 23): which kind of report a text is, given what the
rules answered and how the word model reads it, learned from what the two said on text neither had read.

The rules are right on most of the text they were written against and on about two thirds of the text they had not
seen; the word model misleads in other places. bench/arbiter_held_out.py takes every wave's dev records with the
rules' answer as the code stood before the wave (bench/results/rules_before_wave.jsonl.gz) and the word model's reading
from a model trained without the wave, and fits a 15-way logistic regression on both (the features below). Where its
answer differs from the doctor's and it holds at least `Arbiter.at` of the probability, its answer goes first, as a
guess that says so; the rules' items stay after it. What the rules read outranks words (`outranked`): it never
answers over a series the rules read and called fine, nor over an exception whose own line they read, never makes a
CUDA error they read a plain exception, never names another memory kind where the OOM message's numbers settled one,
and says `healthy` only over warnings, never over an error (the warnings are then kept as notes).

Pure: the arrays come in (loratui/sources/word_model.py loads them), an answer or None goes out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from loratui.logic.advisor.advice import ERROR, INFO, WARNING, Advice
from loratui.logic.advisor.failure import read_raised
from loratui.logic.advisor.oom_advice import host_memory, kind_unsettled
from loratui.logic.categories import answer_category
from loratui.logic.word_guess import MEMORY_KINDS, Reading, guessed_advice


@dataclass(frozen=True)
class Arbiter:
    """The arrays of a trained arbiter (bench/arbiter_held_out.py --write)."""

    kinds: tuple[str, ...]
    """The categories, in the order its features and its answers are laid out."""
    coef: Any
    """(len(kinds), features): `features`' layout."""
    intercept: Any
    at: float
    """The probability at or above which its answer goes first (the one threshold right most often held out, over
    every wave)."""
    rows: int
    """The held-out records it learned from."""


def features(kinds: tuple[str, ...], rules: str, reading: Reading) -> Any:
    """P(problem), the kinds' probabilities, the rules' answer (one-hot), the kinds' probabilities where the rules
    gave each answer (how far the words are trusted depends on what the rules said), and P(problem) likewise."""
    import numpy as np

    words = np.array([reading.kinds.get(kind, 0.0) for kind in kinds])
    said = np.array([rules == kind for kind in kinds], dtype=np.float64)
    return np.concatenate([[reading.p_problem], words, said, np.outer(said, words).ravel(), said * reading.p_problem])


def answer(arbiter: Arbiter, rules: str, reading: Reading) -> tuple[str, float]:
    """The kind the arbiter reads most likely, and its probability."""
    scores = arbiter.intercept + arbiter.coef @ features(arbiter.kinds, rules, reading)
    top = int(scores.argmax())
    return arbiter.kinds[top], 1.0 / float(sum(math.exp(float(s - scores[top])) for s in scores))


def outranked(kind: str, rules_items: list[Advice], series: bool) -> bool:
    """Whether what the rules read outranks the arbiter's `kind`: a series they read (`series`) and called fine;
    an exception whose own line they read (its type and message); a CUDA error, against a plain exception; an OOM
    whose kind the message's numbers settled, against another memory kind; an error, against `healthy`."""
    rules = answer_category(rules_items)
    first = rules_items[0] if rules_items else None
    if series and rules == "healthy":
        return True
    if first is not None and read_raised(first):
        # held out over 53 waves, 164 of 186 such texts were settled as that exception; the arbiter's other answers
        # there (Windows' `NCCL built in` read as a hang, mamba's `undefined symbol` as flash-attn) were wrong 5
        # times, right 2 (docs/learned_fallback.md, twenty-second session)
        return True
    if first is not None and first.id == "cuda_error" and kind == "exception_other":
        # a CUDA library's or the driver's own error the rules read (`cuFFT error: CUFFT_INTERNAL_ERROR`, `Could not
        # find compatible tinycudann extension for compute capability 75`) is not made a plain exception because the
        # words of its traceback read like one (G1, held out over 72 waves: 4,145 -> 4,148 of 5,178, cuda_error +3 and
        # nothing else moved; docs/learned_fallback.md, twenty-fifth session)
        return True
    if first is not None and host_memory(first) and kind.startswith("oom_"):
        # G6: the host's RAM the rules read (the kernel's kill, the host allocator's message, the person's words of
        # RAM) is not made the card's memory because the words tell of memory: on the dev texts of waves 89-118, which
        # neither the word model nor the arbiter had read, its memory kinds there were wrong 16 times and right twice
        # (G6: 1,250 -> 1,264 of 1,642; docs/learned_fallback.md, thirtieth session)
        return True
    if first is not None and first.id in MEMORY_KINDS and not kind_unsettled(first) and kind in MEMORY_KINDS:
        return kind != first.id
    return kind == "healthy" and any(item.severity == ERROR for item in rules_items)


def arbitrated(arbiter: Arbiter, rules_items: list[Advice], items: list[Advice], reading: Reading,
               series: bool = False) -> list[Advice]:
    """`items` (the rules' items, a guess perhaps first) with the arbiter's answer first where it differs from what
    they answer, holds `at` of the probability, and no number the rules judged outranks it (`outranked`)."""
    rules = answer_category(rules_items)
    kind, p = answer(arbiter, rules, reading)
    if kind == answer_category(items) or p < arbiter.at or outranked(kind, rules_items, series):
        return items
    if kind != "healthy":
        return [_advice(kind, p, rules, arbiter.rows), *items]
    return [_healthy(p, rules, arbiter.rows), *(replace(item, severity=INFO) if item.severity == WARNING else item
                                                 for item in rules_items)]


def _weighed(p: float, rules: str, rows: int) -> str:
    said = "no problem" if rules == "healthy" else rules
    return (f"an arbiter trained on {rows} real reports that neither the rules nor the word model had read, given "
            f"the rules' answer ({said}) and the words: {p:.0%}")


def _advice(kind: str, p: float, rules: str, rows: int) -> Advice:
    why = ("no log line or number here shows it" if rules == "healthy" else
           f"weighed against the rules' answer, {rules}, which on text like this is often not the cause")
    return guessed_advice(kind, why, _weighed(p, rules, rows))


def _healthy(p: float, rules: str, rows: int) -> Advice:
    return Advice(
        id="reads_healthy", severity=INFO,
        title="Probably nothing wrong: its words read like a report of a run that is fine (a guess; the finding "
              "below is kept as a note)",
        evidence=[_weighed(p, rules, rows), "check first: whether the loss still falls over a longer window"],
        change={}, step=0)
