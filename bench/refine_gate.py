"""The word model refining a catch-all answer of the rules, measured where neither had read the text (issue 23).

Where the rules' answer before a wave (bench/rules_before_wave.py) is a catch-all (`exception_other`: an exception of
no known kind; `oom_full`: an OOM whose phase nothing read), the model trained on every dev record but that wave's
(bench/guess_gate.py's held_out) may name a more specific kind (word_guess.REFINES) when it is the kind the words read
most like of all problems and holds at least a share T of them. Each T of a grid is shown on all waves, then T is
chosen wave by wave on the other waves (the held-out figure). Sealed records are dropped as they are read.

Run (needs the `experiments` extra): PYTHONPATH=$PWD python bench/refine_gate.py    (about five minutes on one core)
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from guess_gate import asked, held_out, wave_records  # noqa: E402

from loratui.logic import word_guess  # noqa: E402

GRID = (None, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
CATCH_ALL = {"exception_other": "exception", "oom_full": "oom_full"}
"""The rules' catch-all answers, corpus category -> advice id (word_guess.REFINES is keyed by advice id)."""


def answer(b: dict, probs: dict, at: float | None) -> str:
    """The doctor's answer under the gate `at` (None: the rules' answer as it was)."""
    if at is None or b["rules"] not in CATCH_ALL or b["file"] not in probs:
        return b["rules"]
    picked = word_guess.refine_pick(probs[b["file"]][1], word_guess.REFINES[CATCH_ALL[b["rules"]]], at)
    return picked[0] if picked is not None else b["rules"]


def table(before: list[dict], probs: dict, at: float | None) -> dict[str, list[int]]:
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for b in before:
        per[b["want"]][0] += answer(b, probs, at) == b["want"]
        per[b["want"]][1] += 1
    return per


def right(per: dict[str, list[int]]) -> int:
    return sum(r for r, _ in per.values())


def changes(per: dict[str, list[int]], base: dict[str, list[int]]) -> str:
    return " ".join(f"{c} {per[c][0] - base[c][0]:+d}" for c in sorted(per) if per[c][0] != base[c][0]) or "none"


def main() -> None:
    rows, before = wave_records()
    texts = asked([r for r in rows if r["file"] in {b["file"] for b in before}])
    probs = held_out(rows, before, texts)
    base = table(before, probs, None)
    print(f"{len(before)} wave records from {len({b['at'] for b in before})} waves; rules before each wave right on "
          f"{right(base)}; catch-all answers: " + ", ".join(
              f"{c} {sum(b['rules'] == c for b in before)}" for c in CATCH_ALL))
    for at in GRID[1:]:
        per = table(before, probs, at)
        print(f"  T={at}: {right(per)} right ({changes(per, base)})")
    held: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    chosen: dict[float | None, int] = defaultdict(int)
    for wave in sorted({b["at"] for b in before}):
        rest = [b for b in before if b["at"] != wave]
        at = max(GRID, key=lambda t: (right(table(rest, probs, t)), t is not None, t or 0))
        chosen[at] += 1
        for category, (r, n) in table([b for b in before if b["at"] == wave], probs, at).items():
            held[category][0] += r
            held[category][1] += n
    print(f"chosen on the other waves, wave by wave: {dict(chosen)}")
    print(f"held out: {right(held)} of {len(before)} right against the rules' {right(base)} ({changes(held, base)})")


if __name__ == "__main__":
    main()
