"""Issue 23 experiment, second look: the learned fallback on text the rules had NOT yet seen.

bench/learned_cv.py scores the rules in-sample (they were written against the dev excerpts), so few rule-silent
sick records are left for a fallback to fix. Here each corpus batch merged into main is read by the rules of main
just BEFORE that merge (extracted with `git archive`), on the batch's new DEV records only (sealed ones are dropped
as they are read). The fallback (bench/learned_cv.py's features and models) is trained on every current dev record
whose source is not one of that batch's, and may speak only where those older rules said healthy. Its gate is not
tuned here: the table shows every p_min of a grid (margin 0), to show whether any gate would pay.

Run: PYTHONPATH=$PWD python bench/learned_fresh.py   (needs git history and the `experiments` extra)
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from learned_cv import P_GRID, dev_rows, features, proba  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

MERGES = ("08c0864", "cb2bfcb", "c105095", "061819e", "8ca4bec")
"""main's merges of the colI, colG, colH, colJ and colK batches (issue 23's third session)."""
READ = """
import json, sys, tempfile
from pathlib import Path
sys.path.append(sys.argv[1])
from test_corpus import top_category
from loratui.commands.doctor import diagnose
rows, out = json.load(sys.stdin), []
with tempfile.TemporaryDirectory() as tmp:
    for row in rows:
        path = Path(tmp) / row["file"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(row["text"].encode("utf-8"))
        out.append(top_category(diagnose(path)[0]))
assert Path(sys.modules["loratui"].__file__).parent.parent == Path.cwd(), "not the old loratui"
print(json.dumps(out))
"""


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def dev_at(commit: str) -> dict[str, dict]:
    """The dev records of the corpus at one commit, by file name (sealed ones are never kept)."""
    found = {}
    for path in git("ls-tree", "--name-only", commit, "tests/data/real/").split():
        if path.endswith(".jsonl"):
            for line in git("show", f"{commit}:{path}").splitlines():
                row = json.loads(line) if line.strip() else {}
                if row and row.get("split", "dev") != "sealed":
                    found[row["file"]] = row
    return found


def old_rules(commit: str, rows: list[dict], tmp: Path) -> list[str]:
    """What `doctor` at `commit` said first about each record."""
    code = tmp / commit
    code.mkdir()
    archive = subprocess.run(["git", "archive", commit, "loratui"], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(code)], input=archive, check=True)
    # cwd away from the worktree: `python -c` puts the cwd first on sys.path, which would import today's loratui
    done = subprocess.run([sys.executable, "-c", READ, str(ROOT / "tests")], input=json.dumps(rows), text=True,
                          capture_output=True, check=True, cwd=code, env={"PYTHONPATH": str(code), "PATH": "/usr/bin:/bin"})
    return json.loads(done.stdout)


def main() -> None:
    everything = dev_rows()
    texts, labels = [r["text"] for r in everything], [r["category"] for r in everything]
    fresh: list[tuple[str, str, list[float], object]] = []  # (label, old rules' answer, probs, classes)
    two_stage: list[tuple[str, str, float, str]] = []  # (label, old rules' answer, P(sick), top sick class)
    with tempfile.TemporaryDirectory() as tmp:
        for merge in MERGES:
            parent = git("rev-parse", f"{merge}^1").strip()
            before, after = dev_at(parent), dev_at(merge)
            rows = [row for name, row in after.items() if name not in before]
            answers = old_rules(parent, rows, Path(tmp))
            sources = {row["source"] for row in rows}
            train = [i for i, r in enumerate(everything) if r["source"] not in sources]
            test_texts = [row["text"] for row in rows]
            classes, probs = proba_on("logreg", texts, labels, train, test_texts)
            print(f"{merge}: {len(rows)} fresh dev records, old rules right on "
                  f"{sum(a == r['category'] for a, r in zip(answers, rows))}")
            fresh += [(row["category"], answer, probs[k], classes) for k, (row, answer) in enumerate(zip(rows, answers))]
            two_stage += binary_gate(texts, labels, train, rows, answers)
    report(fresh)
    report_two_stage(two_stage, len(fresh), sum(label == answer for label, answer, _, _ in fresh))


def proba_on(kind, texts, labels, train, test_texts):
    """proba() for texts outside the training list."""
    joined = texts + test_texts
    return proba(kind, joined, labels + ["?"] * len(test_texts), train, list(range(len(texts), len(joined))))


def report(fresh) -> None:
    n = len(fresh)
    rules = sum(label == answer for label, answer, _, _ in fresh)
    pool = [(label, probs, classes) for label, answer, probs, classes in fresh if answer == "healthy"]
    sick = [p for p in pool if p[0] != "healthy"]
    print(f"fresh dev records: {n}; old rules right on {rules}; old rules say healthy on {len(pool)} "
          f"({len(pool) - len(sick)} truly healthy, {len(sick)} sick)")
    print("  the sick ones by category: " + ", ".join(f"{name} {count}" for name, count in
                                                      sorted(Counter(label for label, _, _ in sick).items())))
    print(f"learned (top class) right on {sum(c[int(np.argmax(p))] == l for l, p, c in sick)} of the sick ones")
    print(f"{'p_min':>6}{'spoke':>7}{'fixed':>7}{'healthy lost':>14}{'right':>7}  (right = old rules + fixed - lost)")
    for p_min in P_GRID:
        spoke = [(l, c[int(np.argmax(p))]) for l, p, c in pool
                 if np.max(p) >= p_min and c[int(np.argmax(p))] != "healthy"]
        fixed = sum(l == g for l, g in spoke)
        lost = sum(l == "healthy" for l, _ in spoke)
        print(f"{p_min:>6.2f}{len(spoke):>7}{fixed:>7}{lost:>14}{rules + fixed - lost:>7} / {n}")


def binary_gate(texts, labels, train, rows, answers):
    """Variant: a balanced sick-vs-healthy model decides whether to speak, the 15-way model's best sick class what."""
    xtr, xte = features([texts[i] for i in train], [row["text"] for row in rows])
    sick = LogisticRegression(C=10.0, max_iter=2000, class_weight="balanced", random_state=0)
    sick.fit(xtr, [labels[i] != "healthy" for i in train])
    which = LogisticRegression(C=10.0, max_iter=2000, random_state=0).fit(xtr, [labels[i] for i in train])
    p_sick, p_class = sick.predict_proba(xte)[:, 1], which.predict_proba(xte)
    p_class[:, list(which.classes_).index("healthy")] = -1
    return [(row["category"], answer, p_sick[k], which.classes_[int(np.argmax(p_class[k]))])
            for k, (row, answer) in enumerate(zip(rows, answers))]


def report_two_stage(found, n, rules) -> None:
    print(f"two-stage variant{'':>3}{'spoke':>7}{'fixed':>7}{'healthy lost':>14}{'right':>7}")
    for t in (0.5, 0.7, 0.8, 0.9, 0.95):
        spoke = [(label, guess) for label, answer, p, guess in found if answer == "healthy" and p >= t]
        fixed, lost = sum(label == guess for label, guess in spoke), sum(label == "healthy" for label, _ in spoke)
        print(f"P(sick) >= {t:<8.2f}{len(spoke):>7}{fixed:>7}{lost:>14}{rules + fixed - lost:>7} / {n}")


if __name__ == "__main__":
    main()
