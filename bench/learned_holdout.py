"""Issue 23 experiment, third look: the learned fallback on a holdout wave no rule writer and no model saw.

Trains bench/learned_cv.py's features on every dev record of the current corpus, reads each given batch file
(a holdout wave kept off main) with the current rules, and lets the fallback speak only where the rules say
healthy. Gates were fixed BEFORE this run from last session's fresh-text curves (docs/learned_fallback.md):
15-way p_min 0.6, and the two-stage variant at P(sick) >= 0.9. The rest of each curve is printed for context only.

Run: PYTHONPATH=$PWD python bench/learned_holdout.py tests/data/real/batch-colS.jsonl ...
     PYTHONPATH=$PWD python bench/learned_holdout.py --sealed   (the sealed split, counts only)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from learned_cv import dev_rows, rule_answers
from learned_fresh import binary_gate, proba_on


def main() -> None:
    train_rows = dev_rows()
    if sys.argv[1:] == ["--sealed"]:  # the corpus's sealed split, read by counts only
        held = [json.loads(line) for path in [ROOT / "tests/data/real/corpus.jsonl",
                                               *sorted((ROOT / "tests/data/real").glob("batch-*.jsonl"))]
                for line in path.read_text().splitlines() if line.strip() and '"sealed"' in line]
        held = [row for row in held if row.get("split") == "sealed"]
    else:
        held = [json.loads(line) for path in sys.argv[1:] for line in Path(path).read_text().splitlines()
                if line.strip()]
    held_sources = {row["source"] for row in held}
    train_rows = [row for row in train_rows if row["source"] not in held_sources]
    texts, labels = [r["text"] for r in train_rows], [r["category"] for r in train_rows]
    answers = rule_answers(held)
    n, rules = len(held), sum(a == r["category"] for a, r in zip(answers, held))
    classes, probs = proba_on("logreg", texts, labels, list(range(len(texts))), [r["text"] for r in held])
    pool = [k for k, a in enumerate(answers) if a == "healthy"]
    print(f"holdout {n}; rules right {rules}; rules say healthy on {len(pool)} "
          f"({sum(held[k]['category'] == 'healthy' for k in pool)} truly healthy)")
    print(f"{'15-way p_min':>12}{'spoke':>7}{'fixed':>7}{'healthy lost':>14}{'right':>7}")
    for p_min in (0.0, 0.4, 0.5, 0.6, 0.7, 0.8):
        spoke = [k for k in pool if np.max(probs[k]) >= p_min and classes[int(np.argmax(probs[k]))] != "healthy"]
        fixed = sum(classes[int(np.argmax(probs[k]))] == held[k]["category"] for k in spoke)
        lost = sum(held[k]["category"] == "healthy" for k in spoke)
        mark = "  <- declared" if p_min == 0.6 else ""
        print(f"{p_min:>12.2f}{len(spoke):>7}{fixed:>7}{lost:>14}{rules + fixed - lost:>7} / {n}{mark}")
    found = binary_gate(texts, labels, list(range(len(texts))), held, answers)
    print(f"{'P(sick) >=':>12}{'spoke':>7}{'fixed':>7}{'healthy lost':>14}{'right':>7}")
    for t in (0.5, 0.7, 0.8, 0.9, 0.95):
        spoke = [(label, guess) for label, answer, p, guess in found if answer == "healthy" and p >= t]
        fixed, lost = sum(l == g for l, g in spoke), sum(l == "healthy" for l, _ in spoke)
        mark = "  <- declared" if t == 0.9 else ""
        print(f"{t:>12.2f}{len(spoke):>7}{fixed:>7}{lost:>14}{rules + fixed - lost:>7} / {n}{mark}")


if __name__ == "__main__":
    main()
