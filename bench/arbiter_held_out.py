"""The arbiter between the rules' answer and the words (loratui/logic/arbiter.py; issue 23), measured where neither
the rules nor the word model had read the text, and (`--write`) trained on every row and written into the package.

Rows: every wave's dev records with the rules' answer as the code stood before the wave
(bench/results/rules_before_wave.jsonl.gz) and the word model's reading of the text the doctor hands it, from a model
trained on every dev record but the wave's (bench/guess_gate.py's asked and held_out). Held out: for each wave, the
arbiter is trained on the other waves' rows, and its threshold chosen on them; the doctor's answer without it is
guess_gate's and refine_gate's (the gates as shipped). Features (`arbiter.features`): P(problem), the 15 kinds'
probabilities, the rules' answer one-hot, the kinds' probabilities times that one-hot, and P(problem) likewise; a
multinomial logistic regression. Sealed records are dropped as they are read.

Its answer is kept only where the doctor's own guard lets it speak (`arbiter.outranked` on today's rules' items, from
guess_gate.spied: numbers the rules judged outrank words). The threshold is chosen, wave by wave, on the other waves,
and reported on the newest waves (40-44) alone and as one threshold for every wave.

`--against REV` also sets the shipped arbiter (loratui/arbiter.npz) against the held-out one on the rows of the waves
the shipped one never read (the batches missing from REV's rules_before_wave.jsonl.gz, REV being the commit that
wrote it): a retraining is judged there, where neither had read the text.

Run (needs the `experiments` extra): PYTHONPATH=$PWD python bench/arbiter_held_out.py [--probs CACHE.pkl]
[--write newest|all] [--against REV]
(about fifteen minutes on one core, most of it the word models; --probs keeps their readings for a second run)
"""

from __future__ import annotations

import argparse
import gzip
import json
import pickle
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import refine_gate  # noqa: E402
from guess_gate import answer as gate_answer  # noqa: E402
from guess_gate import asked, held_out, spied, wave_records  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

from loratui.logic import arbiter, word_guess  # noqa: E402
from loratui.logic.word_guess import Reading  # noqa: E402
from loratui.sources.word_model import load_arbiter  # noqa: E402

OUT = ROOT / "loratui" / "arbiter.npz"
NEWEST = re.compile(r"batch-col4[0-4][a-z]\.jsonl")
"""Waves 40-44: older frameworks and research code, where the nineteenth session's arbiter failed."""

C = 3.0
"""Declared with the arbiter's bar (docs/learned_fallback.md, nineteenth session): the best of 0.3, 1 and 3 held out."""
GRID = (0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
SHIPPED_GATE = (word_guess.SPEAK_AT, None, word_guess.KIND_AT, 0.0)


def readings(cache: Path | None) -> tuple[list[dict], dict, dict, dict]:
    """The wave records, the text the doctor hands the guess, the held-out model's reading of each, and today's rules'
    items (guess_gate.spied), which the arbiter's guard reads."""
    if cache is not None and cache.exists():
        found = pickle.loads(cache.read_bytes())
        return found["before"], found["texts"], found["probs"], found["facts"]
    rows, before = wave_records()
    waved = [r for r in rows if r["file"] in {b["file"] for b in before}]
    texts, facts = asked(waved), spied(waved, lambda items, text, series: items)
    probs = held_out(rows, before, texts)
    if cache is not None:
        cache.write_bytes(pickle.dumps({"before": before, "texts": texts, "probs": probs, "facts": facts}))
    return before, texts, probs, facts


def shipped(b: dict, texts: dict, probs: dict) -> str:
    """The doctor's answer without the arbiter: the refinement of a catch-all, else the guess where the rules said
    nothing."""
    refined = refine_gate.answer(b, probs, word_guess.REFINE_AT)
    return gate_answer(b, texts, probs, *SHIPPED_GATE) if refined == b["rules"] else refined


def batches_at(rev: str) -> set[str]:
    """The batches whose rows rules_before_wave.jsonl.gz held at commit `rev`."""
    raw = subprocess.run(["git", "show", f"{rev}:bench/results/rules_before_wave.jsonl.gz"], cwd=ROOT,
                         capture_output=True, check=True).stdout
    return {json.loads(line)["batch"] for line in gzip.decompress(raw).decode().splitlines() if line.strip()}


def against_shipped(rev: str, before: list[dict], texts: dict, probs: dict, facts: dict, base: np.ndarray,
                    final: np.ndarray, y: np.ndarray) -> None:
    """Per category, on the rows of the waves the shipped arbiter never read: the doctor without an arbiter, with the
    shipped one (its own threshold) and with the held-out one (`final`)."""
    shipped_arbiter = load_arbiter()
    assert shipped_arbiter is not None
    seen = batches_at(rev)
    unseen = np.array([b["batch"] not in seen for b in before])
    old = base.copy()
    for i, b in enumerate(before):
        if not texts.get(b["file"]):
            continue
        kind, p = arbiter.answer(shipped_arbiter, b["rules"], Reading(*probs[b["file"]]))
        if kind != base[i] and p >= shipped_arbiter.at and not arbiter.outranked(kind, facts.get(b["file"], []),
                                                                                   texts[b["file"]][1]):
            old[i] = kind
    print(f"rows of waves the shipped arbiter ({shipped_arbiter.rows} rows) never read: {unseen.sum()} from "
          f"{len({b['at'] for b, u in zip(before, unseen) if u})} waves")
    print(f"  {'category':24} {'none':>5} {'OLD':>5} {'NEW':>5} {'of':>5}")
    for kind in sorted(set(y[unseen])):
        at = unseen & (y == kind)
        print(f"  {kind:24} {(base == y)[at].sum():5} {(old == y)[at].sum():5} {(final == y)[at].sum():5} "
              f"{at.sum():5}")
    print(f"  {'overall':24} {(base == y)[unseen].sum():5} {(old == y)[unseen].sum():5} "
          f"{(final == y)[unseen].sum():5} {unseen.sum():5}")


def fit(x: np.ndarray, y: np.ndarray) -> LogisticRegression:
    return LogisticRegression(C=C, max_iter=3000).fit(x, y)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probs", type=Path, help="a cache of the held-out word models' readings (pickle)")
    parser.add_argument("--against", metavar="REV", help="the commit that wrote the shipped arbiter")
    parser.add_argument("--write", choices=("newest", "all"),
                        help=f"train on every row and write {OUT.relative_to(ROOT)} at the threshold best held out on "
                        "the newest waves (40-44) or on all waves (the same threshold on every wave)")
    args = parser.parse_args()
    before, texts, probs, facts = readings(args.probs)
    kinds = tuple(sorted({b["want"] for b in before}))
    x = np.array([arbiter.features(kinds, b["rules"], Reading(*probs[b["file"]])) for b in before])
    y = np.array([b["want"] for b in before])
    base = np.array([shipped(b, texts, probs) for b in before])
    asked_text = np.array([bool(texts.get(b["file"])) for b in before])  # the doctor asks the words there only
    waves = np.array([b["at"] for b in before])
    newest = np.array([bool(NEWEST.fullmatch(b["batch"])) for b in before])
    top, p_top = np.empty(len(y), dtype=object), np.zeros(len(y))
    for wave in sorted(set(waves)):
        out = waves == wave
        model = fit(x[~out], y[~out])
        p = model.predict_proba(x[out])
        top[out], p_top[out] = model.classes_[p.argmax(1)], p.max(1)
    allowed = np.array([asked_text[i] and not arbiter.outranked(top[i], facts.get(b["file"], []), texts[b["file"]][1])
                        for i, b in enumerate(before)])

    def decided(at: float, where: np.ndarray) -> np.ndarray:
        answers = base.copy()
        switch = where & allowed & (top != base) & (p_top >= at)
        answers[switch] = top[switch]
        return answers

    final, chosen = base.copy(), Counter()
    for wave in sorted(set(waves)):
        out = waves == wave
        at = max(GRID, key=lambda t: ((decided(t, ~out) == y)[~out].sum(), t))
        chosen[at] += 1
        final[out] = decided(at, out)[out]
    print(f"{len(y)} wave records from {len(set(waves))} waves; rules before each wave right on "
          f"{sum(b['rules'] == b['want'] for b in before)}, the doctor without the arbiter {(base == y).sum()}")
    print(f"held out (threshold chosen wave by wave on the others: {dict(chosen)}): {(final == y).sum()} right")
    print(f"waves 40-44 alone ({newest.sum()} records): {(base == y)[newest].sum()} -> {(final == y)[newest].sum()}")
    best_newest = max(GRID, key=lambda t: ((decided(t, newest) == y)[newest].sum(), t))
    everywhere = np.ones(len(y), dtype=bool)
    print(f"threshold best on waves 40-44's held-out rows: {best_newest}")
    print("the same threshold on every wave, held out: " +
          ", ".join(f"{t}: {(decided(t, everywhere) == y).sum()}" for t in GRID))
    best_all = max(GRID, key=lambda t: ((decided(t, everywhere) == y).sum(), t))
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for want, was, now in zip(y, base, final):
        per[want][0] += was == want
        per[want][1] += now == want
        per[want][2] += 1
    for kind in kinds:
        print(f"  {kind:24} {per[kind][0]:4} -> {per[kind][1]:4} of {per[kind][2]}")
    moves: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for want, was, now in zip(y, base, final):
        if was != now:
            moves[was, now][now != want] += 1
    print("moves (the doctor's answer -> the arbiter's: right, wrong):")
    for (was, now), (right, wrong) in sorted(moves.items(), key=lambda m: -sum(m[1])):
        print(f"  {was:24} -> {now:24} {right:3} {wrong:3}")
    if args.against:
        against_shipped(args.against, before, texts, probs, facts, base, final, y)
    if args.write:
        shipped_at = best_newest if args.write == "newest" else best_all
        model = fit(x, y)
        assert tuple(model.classes_) == kinds
        np.savez_compressed(OUT, kinds=np.frombuffer("\n".join(kinds).encode(), dtype=np.uint8),
                            coef=model.coef_.astype(np.float32), intercept=model.intercept_.astype(np.float32),
                            at=np.float32(shipped_at), rows=np.int32(len(y)))
        print(f"{OUT.relative_to(ROOT)}: trained on {len(y)} held-out records, at {shipped_at}")


if __name__ == "__main__":
    main()
