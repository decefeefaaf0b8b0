"""Counts, never text: how many excerpts of each category `doctor` names first, rules alone and with the word model's
guess, per split (issue 23). For scoring a wave before anyone reads it (docs/corpus_collection.md), and for the
sealed table a session's note gives first (run it in a worktree of the starting commit and in the final tree).

    PYTHONPATH=$PWD python bench/wave_counts.py BATCH.jsonl ...        # a wave's batch files
    PYTHONPATH=$PWD python bench/wave_counts.py --split sealed         # the whole corpus's sealed split (or dev)
    ... --corpus DIR                                                   # another tree's tests/data/real

The code on PYTHONPATH answers; the corpus is this tree's unless --corpus says otherwise, so a worktree of an older
commit can score today's excerpts.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def records(paths: list[Path]) -> list[dict]:
    return [json.loads(line) for path in paths for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def counts(rows: list[dict]) -> dict[tuple[str, str], list[int]]:
    """(split, category) -> [rules right, with the guess right, of]."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_corpus import top_category

    from loratui.commands.doctor import diagnose

    per: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    with tempfile.TemporaryDirectory() as tmp:
        for row in rows:
            path = Path(tmp) / row["file"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(row["text"].encode("utf-8"))
            want, key = row["category"], (row.get("split", "dev"), row["category"])
            per[key][0] += top_category(diagnose(path, guess=False)[0]) == want
            per[key][1] += top_category(diagnose(path, guess=True)[0]) == want
            per[key][2] += 1
    return per


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("batches", nargs="*", type=Path)
    parser.add_argument("--split", choices=("sealed", "dev"))
    parser.add_argument("--corpus", type=Path, default=ROOT / "tests" / "data" / "real")
    args = parser.parse_args()
    paths = args.batches or sorted(args.corpus.glob("*.jsonl"))
    rows = [row for row in records(paths) if args.split is None or row.get("split", "dev") == args.split]
    per = counts(rows)
    print("| split | category | rules | +guess | of |\n|---|---|---|---|---|")
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for (split, category), (rules, guessed, n) in sorted(per.items()):
        print(f"| {split} | {category} | {rules} | {guessed} | {n} |")
        for k, value in enumerate((rules, guessed, n)):
            totals[split][k] += value
    for split, (rules, guessed, n) in sorted(totals.items()):
        print(f"| {split} | **overall** | **{rules}** | **{guessed}** | **{n}** |")


if __name__ == "__main__":
    main()
