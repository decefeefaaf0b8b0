"""Load the word model and the arbiter that ship in the package (loratui/word_model.npz and loratui/arbiter.npz,
written by bench/train_word_model.py and bench/arbiter_held_out.py --write)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from loratui.logic.arbiter import Arbiter
from loratui.logic.word_guess import WordModel

PATH = Path(__file__).resolve().parent.parent / "word_model.npz"
ARBITER = PATH.with_name("arbiter.npz")


def _lines(array) -> list[str]:  # type: ignore[no-untyped-def]
    return array.tobytes().decode("utf-8").split("\n")


@lru_cache(maxsize=1)
def load() -> WordModel | None:
    """The model, or None when the file is missing or unreadable (then `doctor` simply gives no guess)."""
    import numpy as np

    try:
        with np.load(PATH) as data:
            return WordModel(
                word_index={t: i for i, t in enumerate(_lines(data["word_vocab"]))}, word_idf=data["word_idf"],
                char_index={t: i for i, t in enumerate(_lines(data["char_vocab"]))}, char_idf=data["char_idf"],
                sick_coef=data["sick_coef"], sick_intercept=float(data["sick_intercept"]),
                kind_coef=data["kind_coef"], kind_intercept=data["kind_intercept"],
                kinds=tuple(_lines(data["kinds"])), records=int(data["records"]))
    except (OSError, ValueError, KeyError):
        return None


@lru_cache(maxsize=1)
def load_arbiter() -> Arbiter | None:
    """The arbiter, or None when the file is missing or unreadable (then `doctor` answers as the rules and the
    guess do)."""
    import numpy as np

    try:
        with np.load(ARBITER) as data:
            return Arbiter(kinds=tuple(_lines(data["kinds"])), coef=data["coef"].astype(np.float64),
                           intercept=data["intercept"].astype(np.float64), at=float(data["at"]),
                           rows=int(data["rows"]))
    except (OSError, ValueError, KeyError):
        return None
