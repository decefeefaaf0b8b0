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

Sealed records are dropped as they are read (learned_cv.dev_rows). Each variant trains 2 models per wave.

Run (needs the `experiments` extra): PYTHONPATH=$PWD python bench/guess_model.py [VARIANT ...]
(about ten minutes a variant on one core; all of them without arguments)
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from guess_gate import asked, table, wave_records, worth  # noqa: E402
from scipy.sparse import hstack  # noqa: E402
from sklearn.feature_extraction.text import TfidfVectorizer  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from train_word_model import vectorizers  # noqa: E402

from loratui.logic import word_guess  # noqa: E402

Predict = Callable[[str], tuple[float, dict[str, float]]]
SHIPPED_GATE = (word_guess.SPEAK_AT, None, word_guess.KIND_AT, 0.0)
"""guess_gate's gate tuple: P(problem) for prose, none for a judged series, the kind share, its series twin."""


def char25() -> tuple[TfidfVectorizer, TfidfVectorizer]:
    word, _ = vectorizers()
    return word, TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), min_df=2, sublinear_tf=True,
                                 max_features=30000, preprocessor=word_guess.prepared)


def halves(text: str) -> list[str]:
    lines = text.splitlines()
    if len(lines) < 6:
        return []
    half = len(lines) // 2
    return ["\n".join(lines[:half]), "\n".join(lines[half:])]


def fitter(make: Callable[[], tuple[Any, Any]] = vectorizers, c: float = 10.0, kind_weight: str | None = None,
           text_of: Callable[[dict], str] = lambda row: row["text"], split: bool = False) -> Callable[[list], Predict]:
    """A training function for one variant: the vectorizers, C, the kind model's class weight, the text a record
    trains as, and whether its halves train too (weight 0.5 each)."""

    def fit(train: list[dict]) -> Predict:
        texts, labels, weights = [], [], []
        for row in train:
            for k, text in enumerate([text_of(row), *(halves(row["text"]) if split else [])]):
                texts.append(text)
                labels.append(row["category"])
                weights.append(1.0 if k == 0 else 0.5)
        word, char = make()
        x = hstack([word.fit_transform(texts), char.fit_transform(texts)]).tocsr()
        sick = LogisticRegression(C=c, max_iter=2000, class_weight="balanced", random_state=0)
        sick.fit(x, [label != "healthy" for label in labels], sample_weight=weights)
        which = LogisticRegression(C=c, max_iter=2000, class_weight=kind_weight, random_state=0)
        which.fit(x, labels, sample_weight=weights)

        def predict(text: str) -> tuple[float, dict[str, float]]:
            xt = hstack([word.transform([text]), char.transform([text])]).tocsr()
            return float(sick.predict_proba(xt)[0, 1]), dict(zip(which.classes_, which.predict_proba(xt)[0]))
        return predict
    return fit


def variants(texts: dict) -> dict[str, Callable[[list], Predict]]:
    handed = lambda row: texts[row["file"]][0] if texts.get(row["file"]) else row["text"]  # noqa: E731
    return {"shipped": fitter(), "balanced": fitter(kind_weight="balanced"), "c3": fitter(c=3.0),
            "asked": fitter(text_of=handed), "char25": fitter(make=char25), "halves": fitter(split=True)}


def held_out(fit: Callable[[list], Predict], rows: list[dict], before: list[dict], texts: dict) -> dict:
    found = {}
    for wave in sorted({b["at"] for b in before}):
        files = {b["file"] for b in before if b["at"] == wave}
        predict = fit([r for r in rows if r["file"] not in files])
        for name in files:
            text = texts[name][0] if texts.get(name) else next(r["text"] for r in rows if r["file"] == name)
            found[name] = predict(text)
    return found


def main() -> None:
    rows, before = wave_records()
    texts = asked([r for r in rows if r["file"] in {b["file"] for b in before}])
    every = variants(texts)
    names = sys.argv[1:] or list(every)
    print(f"{len(before)} wave records from {len({b['at'] for b in before})} waves; gate {SHIPPED_GATE}")
    print(f"{'variant':>9} {'right':>6} {'weakest':>8} {'healthy kept':>13}")
    for name in names:
        per = table(before, texts, held_out(every[name], rows, before, texts), SHIPPED_GATE)
        weakest, right = worth(per)
        print(f"{name:>9} {right:>6} {weakest:>8.3f} {per['healthy'][0]:>10} / {per['healthy'][1]}", flush=True)


if __name__ == "__main__":
    main()
