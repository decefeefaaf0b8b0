"""Train the word model behind `doctor`'s guess (issue 23) and write it into the package.

Where no rule fires on a pasted text (the doctor would say "no problems found"), a word model may say which kind of
report the text reads like, as a guess. It is the two-stage fallback measured in docs/learned_fallback.md: a
class-balanced logistic regression says whether a problem is described at all, and a 15-way one which kind. Both
read TF-IDF of word 1-2-grams and character 3-5-grams (bench/learned_cv.py's features).

Trained on every DEV record of tests/data/real (never a sealed one: the file keeps the sha256 of every training
source, and tests/test_word_guess.py checks none is sealed). The file also keeps the probabilities scikit-learn gave
on a few training texts, so the package's numpy reader is tested against scikit-learn without needing it installed.

Run (needs the `experiments` extra): PYTHONPATH=$PWD python bench/train_word_model.py   -> loratui/word_model.npz
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from learned_cv import dev_rows
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


def main() -> None:
    rows = dev_rows()
    texts, labels = [r["text"] for r in rows], [r["category"] for r in rows]
    word, char = vectorizers()
    from scipy.sparse import hstack

    x = hstack([word.fit_transform(texts), char.fit_transform(texts)]).tocsr()
    sick = LogisticRegression(C=10.0, max_iter=2000, class_weight="balanced", random_state=0)
    sick.fit(x, [label != "healthy" for label in labels])
    which = LogisticRegression(C=10.0, max_iter=2000, random_state=0).fit(x, labels)
    assert list(sick.classes_) == [False, True]
    picks = np.linspace(0, len(texts) - 1, REFERENCES).astype(int)
    sources = sorted({hashlib.sha256(r["source"].encode()).hexdigest() for r in rows})
    np.savez_compressed(
        OUT,
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
    print(f"{OUT.relative_to(ROOT)}: {len(rows)} dev records from {len(sources)} sources, "
          f"{x.shape[1]} features, {OUT.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
