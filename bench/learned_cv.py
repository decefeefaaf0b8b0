"""Issue 23 experiment: does a gated learned fallback help `doctor` where the rules find nothing?

Protocol (docs/learned_fallback.md): DEV records only (split != "sealed"; sealed records are dropped as they are
read, before their text is kept); 5-fold GroupKFold by source URL; the rules' answer per record comes from
`loratui.commands.doctor.diagnose` scored as tests/test_corpus.py scores it. The fallback speaks only where the
rules say healthy, and only when its calibrated probability and its margin over the runner-up pass thresholds
chosen by an inner grouped CV on the outer fold's training records alone. Deterministic (fixed seeds), n_jobs=1.

Run: PYTHONPATH=$PWD python bench/learned_cv.py   (needs the `experiments` extra: scikit-learn); about a minute
on one core.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np
from sklearn.calibration import CalibratedClassifierCV
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold
from sklearn.pipeline import FeatureUnion
from sklearn.svm import LinearSVC

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "tests" / "data" / "real"
sys.path.insert(0, str(ROOT / "tests"))
from test_corpus import top_category  # noqa: E402  (the corpus test's own scoring)

from loratui.commands.doctor import diagnose  # noqa: E402

P_GRID = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.01)
M_GRID = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)


def dev_rows() -> list[dict]:
    """Every dev record; a sealed record's text is never kept."""
    rows = []
    for path in [REAL / "corpus.jsonl", *sorted(REAL.glob("batch-*.jsonl"))]:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                if row.get("split", "dev") != "sealed":
                    rows.append(row)
    return rows


def rule_answers(rows: list[dict]) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        answers = []
        for row in rows:
            path = Path(tmp) / row["file"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(row["text"].encode("utf-8"))
            answers.append(top_category(diagnose(path)[0]))
        return answers


def features(train: list[str], test: list[str]):
    word = TfidfVectorizer(analyzer="word", ngram_range=(1, 2), min_df=2, sublinear_tf=True, max_features=20000,
                           token_pattern=r"(?u)\b[a-zA-Z_][a-zA-Z_]+\b")
    char = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), min_df=2, sublinear_tf=True, max_features=30000)
    union = FeatureUnion([("word", word), ("char", char)], n_jobs=1)
    return union.fit_transform(train), union.transform(test)


def model(kind: str):
    if kind == "logreg":
        return LogisticRegression(C=10.0, max_iter=2000, random_state=0)
    return CalibratedClassifierCV(LinearSVC(C=0.5, random_state=0), cv=3, method="sigmoid")


def proba(kind: str, texts, labels, train, test):
    xtr, xte = features([texts[i] for i in train], [texts[i] for i in test])
    clf = model(kind).fit(xtr, [labels[i] for i in train])
    return clf.classes_, clf.predict_proba(xte)


def combine(rules, classes, probs, p_min, m_min):
    out = list(rules)
    for k, rule in enumerate(rules):
        order = np.argsort(probs[k])[::-1]
        best, second = probs[k][order[0]], probs[k][order[1]]
        if rule == "healthy" and best >= p_min and best - second >= m_min:
            out[k] = classes[order[0]]
    return out


def choose_gate(kind, texts, labels, groups, rules, idx):
    """Thresholds from an inner grouped CV over the training records only."""
    oof = {}
    inner = GroupKFold(n_splits=4)
    for tr, te in inner.split(idx, groups=[groups[i] for i in idx]):
        classes, probs = proba(kind, texts, labels, [idx[i] for i in tr], [idx[i] for i in te])
        for j, i in enumerate(te):
            oof[idx[i]] = probs[j]
    sub_rules = [rules[i] for i in idx]
    healthy_rules = sum(r == l == "healthy" for r, l in zip(sub_rules, [labels[i] for i in idx]))
    best = (sum(r == labels[i] for r, i in zip(sub_rules, idx)), 1.01, 0.0)
    for p in reversed(P_GRID):  # most conservative first: a looser gate must win strictly
        for m in reversed(M_GRID):
            got = combine(sub_rules, classes, np.array([oof[i] for i in idx]), p, m)
            right = sum(g == labels[i] for g, i in zip(got, idx))
            healthy = sum(g == labels[i] == "healthy" for g, i in zip(got, idx))
            if healthy >= healthy_rules and right > best[0]:
                best = (right, p, m)
    return best[1], best[2]


def table(labels, answers):
    t = defaultdict(lambda: [0, 0])
    for label, got in zip(labels, answers):
        t[label][0] += label == got
        t[label][1] += 1
    return t


def main() -> None:
    rows = dev_rows()
    texts, labels, groups = [r["text"] for r in rows], [r["category"] for r in rows], [r["source"] for r in rows]
    rules = rule_answers(rows)
    for kind in ("logreg", "svc"):
        alone = [None] * len(rows)
        best_p = [0.0] * len(rows)
        final = [None] * len(rows)
        gates = []
        for train, test in GroupKFold(n_splits=5).split(texts, groups=groups):
            p, m = choose_gate(kind, texts, labels, groups, rules, list(train))
            classes, probs = proba(kind, texts, labels, list(train), list(test))
            merged = combine([rules[i] for i in test], classes, probs, p, m)
            for j, i in enumerate(test):
                alone[i] = classes[int(np.argmax(probs[j]))]
                best_p[i] = float(np.max(probs[j]))
                final[i] = merged[j]
            gates.append((p, m))
        tr, ta, tf = table(labels, rules), table(labels, alone), table(labels, final)
        n = len(rows)
        print(f"\n== {kind}  gates per fold (p_min, margin_min): {gates}")
        print(f"{'category':<24}{'rules':>8}{'learned':>9}{'rules+fb':>10}{'of':>5}")
        for c in sorted(tr):
            print(f"{c:<24}{tr[c][0]:>8}{ta[c][0]:>9}{tf[c][0]:>10}{tr[c][1]:>5}")
        s = lambda t: sum(v[0] for v in t.values())  # noqa: E731
        print(f"{'overall':<24}{s(tr):>8}{s(ta):>9}{s(tf):>10}{n:>5}"
              f"   ({s(tr)/n:.1%} / {s(ta)/n:.1%} / {s(tf)/n:.1%})")
        changed = sum(a != b for a, b in zip(rules, final))
        print(f"fallback spoke on {changed} records; of them right {sum(a != b and b == l for a, b, l in zip(rules, final, labels))}")
        pool_report(labels, rules, alone, best_p)




def pool_report(labels, rules, alone, probs_best) -> None:
    """Where the fallback may speak (rules say healthy): what it would gain and what it would cost."""
    pool = [k for k, r in enumerate(rules) if r == "healthy"]
    sick = [k for k in pool if labels[k] != "healthy"]
    print(f"rules say healthy on {len(pool)}: {len(pool) - len(sick)} truly healthy, {len(sick)} sick")
    print(f"  learned right on the sick ones: {sum(alone[k] == labels[k] for k in sick)}; "
          f"learned calls healthy ones sick: {sum(alone[k] != 'healthy' for k in pool if labels[k] == 'healthy')}")
    for k in sorted(pool, key=lambda k: -probs_best[k]):
        print(f"  p={probs_best[k]:.2f} true={labels[k]:<22} learned={alone[k]}")


if __name__ == "__main__":
    main()
