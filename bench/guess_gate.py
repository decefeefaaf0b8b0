"""The word guess's gates, out of fold on the DEV split: how many right kinds each (SPEAK_AT, KIND_AT) buys, and at
how many healthy texts called sick.

For each dev record: the rules' answer and the text `doctor` would hand the guess (none where a series or a loss
table was read: the guess is not asked there), found by running `doctor.diagnose` with the guess spied on; then the
two-stage model of bench/train_word_model.py trained on the other four folds (GroupKFold by source URL) gives that
text's probabilities. The gate is applied where the rules found nothing, as loratui/logic/word_guess.py applies it.
Sealed records are dropped as they are read (learned_cv.dev_rows), so no gate is chosen on them.

Run (needs the `experiments` extra): PYTHONPATH=$PWD python bench/guess_gate.py    (a few minutes on one core)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))
from learned_cv import dev_rows  # noqa: E402
from scipy.sparse import hstack  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import GroupKFold  # noqa: E402
from test_corpus import top_category  # noqa: E402
from train_word_model import vectorizers  # noqa: E402

import loratui.logic.word_guess as word_guess  # noqa: E402
from loratui.commands import doctor  # noqa: E402

SPEAK = (0.7, 0.8, 0.85, 0.9, 0.95)
KIND = (0.0, 0.3, 0.4, 0.5, 0.6)
MEMORY = (0.4, 0.5, 0.6, 0.7)


def rules_and_texts(rows: list[dict]) -> list[tuple[str, str | None, bool]]:
    """Per record: the rules' first category, the text the guess would read (None: the guess is not asked), and
    whether it is asked which memory kind an OOM is (`word_guess.memory_kind`) rather than whether there is a
    problem."""
    asked: list[str] = []
    memory: list[bool] = []
    real = word_guess.guess, word_guess.memory_kind
    word_guess.guess = lambda model, text: asked.append(text)  # returns None: the rules' answer stays
    word_guess.memory_kind = lambda model, text: asked.append(text) or memory.append(True)
    found = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for row in rows:
                path = Path(tmp) / row["file"]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(row["text"].encode("utf-8"))
                asked.clear()
                memory.clear()
                items, _ = doctor.diagnose(path, guess=True)
                found.append((top_category(items), asked[0] if asked else None, bool(memory)))
    finally:
        word_guess.guess, word_guess.memory_kind = real
    return found


def out_of_fold(rows: list[dict], texts: list[str | None]) -> list[tuple[float, dict[str, float]]]:
    """P(problem) and the kinds' probabilities for each record's guess text, from a model that never saw it."""
    labels = [row["category"] for row in rows]
    found: list[tuple[float, dict[str, float]]] = [(0.0, {})] * len(rows)
    for train, test in GroupKFold(n_splits=5).split(rows, groups=[row["source"] for row in rows]):
        word, char = vectorizers()
        x = hstack([word.fit_transform([rows[i]["text"] for i in train]),
                    char.fit_transform([rows[i]["text"] for i in train])]).tocsr()
        sick = LogisticRegression(C=10.0, max_iter=2000, class_weight="balanced", random_state=0)
        sick.fit(x, [labels[i] != "healthy" for i in train])
        which = LogisticRegression(C=10.0, max_iter=2000, random_state=0).fit(x, [labels[i] for i in train])
        for i in test:
            text = texts[i] if texts[i] is not None else rows[i]["text"]
            xt = hstack([word.transform([text]), char.transform([text])]).tocsr()
            found[i] = (float(sick.predict_proba(xt)[0, 1]), dict(zip(which.classes_, which.predict_proba(xt)[0])))
    return found


def memory_answer(rule: str, kinds: dict[str, float], memory_at: float) -> str:
    """word_guess.memory_kind's gate (memory_pick, at `memory_at`) over the rules' default "full"."""
    picked = word_guess.memory_pick(kinds, memory_at)
    return picked[0] if picked is not None else rule


def answer(rule: str, asked: bool, p_sick: float, kinds: dict[str, float], speak: float, kind_at: float) -> str:
    """word_guess.guess's gate (kind_pick) over the rules' answer."""
    picked = word_guess.kind_pick(p_sick, kinds, speak, kind_at) if rule == "healthy" and asked else None
    return picked[0] if picked is not None else rule


def main() -> None:
    rows = dev_rows()
    rules = rules_and_texts(rows)
    probs = out_of_fold(rows, [text for _, text, _ in rules])
    labels = [row["category"] for row in rows]
    right = sum(rule == label for (rule, _, _), label in zip(rules, labels))
    print(f"{len(rows)} dev records; rules alone right on {right}")
    print(f"{'SPEAK_AT':>8} {'KIND_AT':>7} {'right':>6} {'healthy called sick':>20}")
    for speak in SPEAK:
        for kind_at in KIND:
            got = [answer(rule, text is not None and not memory, p, kinds, speak, kind_at)
                   for (rule, text, memory), (p, kinds) in zip(rules, probs)]
            lost = sum(label == rule == "healthy" != g for (rule, _, _), g, label in zip(rules, got, labels))
            print(f"{speak:>8} {kind_at:>7} {sum(g == label for g, label in zip(got, labels)):>6} {lost:>20}")
    unsettled = [(rule, kinds, label) for (rule, _, memory), (_, kinds), label in zip(rules, probs, labels) if memory]
    print(f"\n{len(unsettled)} OOMs whose message settles no kind; the rules say full, right on "
          f"{sum(label == 'oom_full' for _, _, label in unsettled)}")
    for memory_at in MEMORY:
        got = sum(memory_answer(rule, kinds, memory_at) == label for rule, kinds, label in unsettled)
        print(f"  MEMORY_AT {memory_at}: right on {got}")


if __name__ == "__main__":
    main()
