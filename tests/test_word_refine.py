"""A catch-all answer of the rules refined by the words (issue 23): where the rules' first item is an exception of no
known kind, or an OOM with no phase, the word model may name a more specific kind first, as a guess it names as one,
with the rules' own item kept second. Measured wave by wave on text neither had read (bench/refine_gate.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from loratui.commands import doctor
from loratui.logic import word_guess
from loratui.sources import word_model

CRASH = ("I set up the new environment for my fine-tune and the first import already fails:\n"
         "Traceback (most recent call last):\n"
         '  File "train.py", line 3, in <module>\n'
         "    from mylib.layers import Block\n")
"""Written for this test: a traceback cut before its exception line, which the rules answer as an exception of no
known kind (the test is of the wiring: the kinds' probabilities are set by `share_model`)."""
NO_PHASE_OOM = ("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
                "It happens after a while, every time.\n")
"""Written for this test: an OOM whose text says nothing of when it ran out, which the rules answer as oom_full."""


@pytest.fixture(autouse=True)
def no_arbiter(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are the word guess's own gates; the arbiter, which may put another answer before them, is
    tests/test_arbiter.py's."""
    from loratui.sources import word_model

    monkeypatch.setattr(word_model, "load_arbiter", lambda: None)


@pytest.fixture(scope="module")
def model():  # type: ignore[no-untyped-def]
    found = word_model.load()
    assert found is not None, f"{word_model.PATH} is missing or unreadable: run bench/train_word_model.py"
    return found


def share_model(model, kind: str, share: float, second: str = "exception_other"):  # type: ignore[no-untyped-def]
    """The shipped model with its kind scores set so that `kind` holds `share` of the problem kinds and `second`
    the rest (every other kind next to nothing), and a problem described for certain."""
    kinds = list(model.kinds)
    scores = np.full(len(kinds), np.log(1e-9))
    scores[kinds.index(kind)] = np.log(share)
    scores[kinds.index(second)] = np.log(1 - share)
    return replace(model, sick_coef=np.zeros_like(model.sick_coef), sick_intercept=10.0,
                   kind_coef=np.zeros_like(model.kind_coef), kind_intercept=scores)


def test_the_gate_names_an_allowed_kind_at_refine_at() -> None:
    at = word_guess.REFINE_AT
    kinds = {"healthy": 0.5, "flash_attn_unavailable": at + 0.01, "exception_other": 1 - at - 0.01}
    assert word_guess.refine_pick(kinds, word_guess.REFINES["exception"]) == ("flash_attn_unavailable",
                                                                             pytest.approx(at + 0.01))
    kinds = {"healthy": 0.5, "flash_attn_unavailable": at - 0.01, "exception_other": 1 - at + 0.01}
    assert word_guess.refine_pick(kinds, word_guess.REFINES["exception"]) is None
    # the kind the words read most like must be one the catch-all may become: a loss that climbs is no crash's kind
    assert word_guess.refine_pick({"loss_diverging": 0.9, "exception_other": 0.1},
                                  word_guess.REFINES["exception"]) is None
    # an OOM is refined by its phase only (what held the memory is memory_kind's, with its own gate)
    assert word_guess.refine_pick({"oom_other_process": 0.9, "oom_full": 0.1}, word_guess.REFINES["oom_full"]) is None
    assert word_guess.refine_pick({"oom_at_eval": 0.9, "oom_full": 0.1},
                                  word_guess.REFINES["oom_full"])[0] == "oom_at_eval"


def diagnose(tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch, shipped=None) -> list:  # type: ignore[no-untyped-def]
    if shipped is not None:
        monkeypatch.setattr(word_model, "load", lambda: shipped)
    paste = tmp_path / "paste.txt"
    paste.write_text(text, encoding="utf-8")
    return doctor.diagnose(paste, guess=True)[0]


def test_an_exception_of_no_known_kind_gets_the_words_kind_first(model, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    rules = diagnose(tmp_path, CRASH, monkeypatch, share_model(model, "loss_diverging", 0.99))
    assert rules[0].id == "exception"  # no refinement where the words read as no crash's kind
    items = diagnose(tmp_path, CRASH, monkeypatch, share_model(model, "flash_attn_unavailable", 0.9))
    assert [item.id for item in items[:2]] == ["flash_attn_unavailable", "exception"]
    assert "(a guess: the error's own lines do not say what it is about)" in items[0].title
    assert "of the problem kinds it knows, this reads most like flash_attn_unavailable (90%)" in items[0].evidence[0]
    assert items[1].title == rules[0].title  # the rules' own item stays, second
    weak = diagnose(tmp_path, CRASH, monkeypatch, share_model(model, "flash_attn_unavailable",
                                                              word_guess.REFINE_AT - 0.05))
    assert weak[0].id == "exception"


def test_an_oom_with_no_phase_gets_the_words_phase_first(model, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    items = diagnose(tmp_path, NO_PHASE_OOM, monkeypatch, share_model(model, "oom_at_eval", 0.9, "oom_full"))
    assert [item.id for item in items[:2]] == ["oom_at_eval", "oom_full"]
    assert "(a guess: no line here says when the memory ran out)" in items[0].title
    # no phase read and words that tell of another process: the memory kind's guess, as before
    items = diagnose(tmp_path, NO_PHASE_OOM, monkeypatch, share_model(model, "oom_other_process", 0.9, "oom_full"))
    assert [item.id for item in items[:2]] == ["oom_other_process", "oom_full"]
    assert "the OOM message does not say what held the memory" in items[0].title


def test_a_specific_answer_is_not_refined(model, tmp_path: Path,  # type: ignore[no-untyped-def]
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    monkeypatch.setattr(word_guess, "first_guess", lambda reading, catch_all=None, memory=False, plain=False:
                        asked.append(catch_all) if catch_all else None)
    items = diagnose(tmp_path, "{'loss': nan, 'grad_norm': nan, 'learning_rate': 2e-05, 'epoch': 0.1}\n"
                     "RuntimeError: CUDA error: an illegal memory access was encountered\n", monkeypatch)
    assert items[0].id != "exception" and asked == []
    diagnose(tmp_path, CRASH, monkeypatch)
    assert asked == ["exception"]
