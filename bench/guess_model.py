"""Variants of the word model behind `doctor`'s guess, measured where neither the rules nor the model had read the text
(issue 23; docs/learned_fallback.md, eighteenth session).

bench/guess_gate.py's protocol: for each wave of bench/results/rules_before_wave.jsonl.gz, a model is trained on every
dev record but that wave's and asked about the wave's records where the rules before the wave said nothing; here the
gates are the shipped ones (word_guess.SPEAK_AT, KIND_AT; no guess on a judged series) and the model varies:

    shipped   bench/train_word_model.py's: word 1-2-grams + char_wb 3-5-grams, two logistic regressions (C=10)
    balanced  the kind model class-balanced as well
    c3        C=3 for both
    asked     trained on the text the doctor hands the guess (kept lines), not the whole excerpt
    char25    char_wb 2-5-grams (Chinese words are mostly two characters)
    halves    each excerpt of 6 lines or more also trained as its two halves, weight 0.5 each (excerpts are cut
              differently by whoever pastes them)

Sealed records are dropped as they are read (learned_cv.dev_rows). Each variant is train_word_model.fit with other
arguments, trained once per wave.

Run (needs the `experiments` extra): PYTHONPATH=$PWD python bench/guess_model.py [VARIANT ...]
(about ten minutes a variant on one core; all of them without arguments)
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from guess_gate import asked, held_out, table, wave_records, worth  # noqa: E402
from sklearn.feature_extraction.text import TfidfVectorizer  # noqa: E402
from train_word_model import Fitted, fit, vectorizers  # noqa: E402

from loratui.logic import word_guess  # noqa: E402

SHIPPED_GATE = (word_guess.SPEAK_AT, None, word_guess.KIND_AT, 0.0)
"""guess_gate's gate tuple: P(problem) for prose, none for a judged series, the kind share, its series twin."""


def char25() -> tuple[TfidfVectorizer, TfidfVectorizer]:
    word, _ = vectorizers()
    return word, TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), min_df=2, sublinear_tf=True,
                                 max_features=30000, preprocessor=word_guess.prepared)


def variants(texts: dict) -> dict[str, Callable[[list], Fitted]]:
    handed = lambda row: texts[row["file"]][0] if texts.get(row["file"]) else row["text"]  # noqa: E731
    return {"shipped": fit, "balanced": partial(fit, kind_weight="balanced"), "c3": partial(fit, c=3.0),
            "asked": partial(fit, text_of=handed), "char25": partial(fit, make=char25),
            "halves": partial(fit, split=True)}


def main() -> None:
    rows, before = wave_records()
    texts = asked([r for r in rows if r["file"] in {b["file"] for b in before}])
    every = variants(texts)
    names = sys.argv[1:] or list(every)
    print(f"{len(before)} wave records from {len({b['at'] for b in before})} waves; gate {SHIPPED_GATE}")
    print(f"{'variant':>9} {'right':>6} {'weakest':>8} {'healthy kept':>13}")
    for name in names:
        per = table(before, texts, held_out(rows, before, texts, every[name]), SHIPPED_GATE)
        weakest, right = worth(per)
        print(f"{name:>9} {right:>6} {weakest:>8.3f} {per['healthy'][0]:>10} / {per['healthy'][1]}", flush=True)


if __name__ == "__main__":
    main()
