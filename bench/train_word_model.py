"""Train the word model behind `doctor`'s guess (issue 23) and write it into the package.

Where no rule fires on a pasted text (the doctor would say "no problems found"), a word model may say which kind of
report the text reads like, as a guess. It is the two-stage fallback measured in docs/learned_fallback.md: a
class-balanced logistic regression says whether a problem is described at all, and a 15-way one which kind. Both
read TF-IDF of word 1-2-grams and character 3-5-grams (bench/learned_cv.py's features).

Trained on every DEV record of tests/data/real (never a sealed one: the file keeps the sha256 of every training
source, and tests/test_word_guess.py checks none is sealed). The file also keeps the probabilities scikit-learn gave
on a few training texts, so the package's numpy reader is tested against scikit-learn without needing it installed.

Run (needs the `experiments` extra): PYTHONPATH=$PWD python bench/train_word_model.py   -> loratui/word_model.npz
(`fit` is also the training of bench/guess_gate.py's and bench/guess_model.py's held-out models.)
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from learned_cv import dev_rows
from scipy.sparse import hstack
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from loratui.logic.word_guess import prepared

OUT = ROOT / "loratui" / "word_model.npz"
WORD_PATTERN = r"(?u)\b[a-zA-Z_][a-zA-Z_]+\b"
REFERENCES = 40
"""Training texts whose scikit-learn probabilities are kept for the parity test."""


def vectorizers() -> tuple[TfidfVectorizer, TfidfVectorizer]:
    word = TfidfVectorizer(analyzer="word", ngram_range=(1, 2), min_df=2, sublinear_tf=True, max_features=20000,
                           token_pattern=WORD_PATTERN, preprocessor=prepared)
    char = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), min_df=2, sublinear_tf=True, max_features=30000,
                           preprocessor=prepared)
    return word, char


def vocab_bytes(vectorizer: TfidfVectorizer) -> np.ndarray:
    """The vocabulary in column order, one term per line (no term holds a newline), as UTF-8 bytes."""
    terms = sorted(vectorizer.vocabulary_, key=vectorizer.vocabulary_.get)
    assert not any("\n" in term for term in terms)
    return np.frombuffer("\n".join(terms).encode("utf-8"), dtype=np.uint8)


def halves(text: str) -> list[str]:
    """An excerpt of 6 lines or more cut into its two halves (excerpts are cut differently by whoever pastes them);
    none for a shorter one."""
    lines = text.splitlines()
    if len(lines) < 6:
        return []
    half = len(lines) // 2
    return ["\n".join(lines[:half]), "\n".join(lines[half:])]


class Fitted(NamedTuple):
    """The two vectorizers and the two-stage model: whether a problem is described (`sick`), and which kind."""

    word: TfidfVectorizer
    char: TfidfVectorizer
    sick: LogisticRegression
    which: LogisticRegression

    def matrix(self, texts: list[str]) -> Any:
        return hstack([self.word.transform(texts), self.char.transform(texts)]).tocsr()

    def predict(self, text: str) -> tuple[float, dict[str, float]]:
        """P(problem) and the kinds' probabilities by name, as scikit-learn gives them."""
        x = self.matrix([text])
        return float(self.sick.predict_proba(x)[0, 1]), dict(zip(self.which.classes_, self.which.predict_proba(x)[0]))


def fit(rows: list[dict], make: Callable[[], tuple[Any, Any]] = vectorizers, c: float = 10.0,
        kind_weight: str | None = None, text_of: Callable[[dict], str] | None = None,
        split: bool = False) -> Fitted:
    """The model trained on `rows` (the shipped one with the defaults; bench/guess_model.py's variants otherwise):
    the vectorizers, C, the kind model's class weight, the text a record trains as, and whether its halves train too
    (weight 0.5 each)."""
    texts, labels, weights = [], [], []
    for row in rows:
        for k, text in enumerate([text_of(row) if text_of else row["text"], *(halves(row["text"]) if split else [])]):
            texts.append(text)
            labels.append(row["category"])
            weights.append(1.0 if k == 0 else 0.5)
    word, char = make()
    x = hstack([word.fit_transform(texts), char.fit_transform(texts)]).tocsr()
    sick = LogisticRegression(C=c, max_iter=2000, class_weight="balanced", random_state=0)
    sick.fit(x, [label != "healthy" for label in labels], sample_weight=weights)
    which = LogisticRegression(C=c, max_iter=2000, class_weight=kind_weight, random_state=0)
    which.fit(x, labels, sample_weight=weights)
    assert list(sick.classes_) == [False, True]
    return Fitted(word, char, sick, which)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--halves", action="store_true", help="also train each excerpt's halves (a variant measured "
                        "in docs/learned_fallback.md)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    rows = dev_rows()
    texts = [r["text"] for r in rows]
    word, char, sick, which = model = fit(rows, split=args.halves)
    x = model.matrix(texts)
    picks = np.linspace(0, len(texts) - 1, REFERENCES).astype(int)
    sources = sorted({hashlib.sha256(r["source"].encode()).hexdigest() for r in rows})
    np.savez_compressed(
        args.out,
        word_vocab=vocab_bytes(word), word_idf=word.idf_.astype(np.float32),
        char_vocab=vocab_bytes(char), char_idf=char.idf_.astype(np.float32),
        sick_coef=sick.coef_[0].astype(np.float32), sick_intercept=np.float32(sick.intercept_[0]),
        kind_coef=which.coef_.astype(np.float32), kind_intercept=which.intercept_.astype(np.float32),
        kinds=np.frombuffer("\n".join(which.classes_).encode(), dtype=np.uint8),
        records=np.int32(len(rows)),
        sources=np.frombuffer("\n".join(sources).encode(), dtype=np.uint8),
        ref_texts=np.frombuffer("\0".join(texts[i] for i in picks).encode("utf-8"), dtype=np.uint8),
        ref_sick=sick.predict_proba(x[picks])[:, 1], ref_kind=which.predict_proba(x[picks]),
    )
    print(f"{args.out}: {len(rows)} dev records from {len(sources)} sources, {x.shape[1]} features, "
          f"{args.out.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
