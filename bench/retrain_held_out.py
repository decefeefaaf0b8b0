"""Does a word model trained on the newer waves read the older waves' text worse? (issue 23, twenty-fourth session)

That session's four retrained models each passed a bar on the newest waves, and the sealed split then read the last
of them 11 worse than the model it replaced (docs/learned_fallback.md). This asks the same question of dev text,
held out, so that a retraining can be judged on it before any sealed count is read: the older waves' dev records (the
batches numbered below --new-from in rules_before_wave.jsonl.gz, and those with no number) are cut into --folds folds
by a hash of their file; for each fold two models are trained without it, OLD on the dev records of the older waves
and NEW on those and the newer waves' (--new-from to --new-to; later waves are left out of both), and each is asked
about the fold's records where the rules before their wave said nothing (guess_gate.answer, the shipped gates).
Prints first items right per category, OLD against NEW. Sealed records are dropped as they are read.

Run (needs the `experiments` extra): PYTHONPATH=$PWD python bench/retrain_held_out.py [--new-from 72 --new-to 78]
(two trainings a fold: about four minutes in all for five folds on this box, 2026-12-07)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from guess_gate import answer, asked, wave_records  # noqa: E402
from guess_model import SHIPPED_GATE  # noqa: E402
from learned_cv import REAL  # noqa: E402
from train_word_model import fit  # noqa: E402

_WAVE = re.compile(r"batch-col(\d+)")


def wave_of_file() -> dict[str, int]:
    """Each dev record's wave number (its batch's `colNN`), -1 for corpus.jsonl and batches named otherwise."""
    waves = {}
    for path in [REAL / "corpus.jsonl", *sorted(REAL.glob("batch-*.jsonl"))]:
        found = _WAVE.search(path.name)
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                if row.get("split", "dev") != "sealed":
                    waves[row["file"]] = int(found.group(1)) if found else -1
    return waves


def fold_of(name: str, folds: int) -> int:
    return int(hashlib.sha256(name.encode()).hexdigest(), 16) % folds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--new-from", type=int, default=72)
    parser.add_argument("--new-to", type=int, default=78)
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args()
    rows, before = wave_records()
    waves = wave_of_file()
    old = [r for r in rows if waves[r["file"]] < args.new_from]
    new = old + [r for r in rows if args.new_from <= waves[r["file"]] <= args.new_to]
    judged = [b for b in before if waves.get(b["file"], args.new_from) < args.new_from]
    texts = asked([r for r in rows if r["file"] in {b["file"] for b in judged}])
    per: dict[str, dict[str, list[int]]] = {"OLD": defaultdict(lambda: [0, 0]), "NEW": defaultdict(lambda: [0, 0])}
    for fold in range(args.folds):
        held = {b["file"] for b in judged if fold_of(b["file"], args.folds) == fold}
        for name, train in (("OLD", old), ("NEW", new)):
            model = fit([r for r in train if r["file"] not in held])
            for b in (b for b in judged if b["file"] in held):
                asks = b["rules"] == "healthy" and texts.get(b["file"])  # where the guess may speak at all
                probs = {b["file"]: model.predict(texts[b["file"]][0])} if asks else {}
                per[name][b["want"]][0] += answer(b, texts, probs, *SHIPPED_GATE) == b["want"]
                per[name][b["want"]][1] += 1
        print(f"fold {fold + 1}/{args.folds} done", file=sys.stderr, flush=True)
    print(f"{len(judged)} older-wave dev records held out in {args.folds} folds; OLD trained on {len(old)} dev "
          f"records, NEW on {len(new)} (waves {args.new_from}-{args.new_to} added)")
    print(f"{'category':<24} {'OLD':>5} {'NEW':>5} {'of':>5}")
    for kind in sorted(per["OLD"]):
        print(f"{kind:<24} {per['OLD'][kind][0]:>5} {per['NEW'][kind][0]:>5} {per['OLD'][kind][1]:>5}")
    print(f"{'overall':<24} {sum(v[0] for v in per['OLD'].values()):>5} {sum(v[0] for v in per['NEW'].values()):>5} "
          f"{sum(v[1] for v in per['OLD'].values()):>5}")


if __name__ == "__main__":
    main()
