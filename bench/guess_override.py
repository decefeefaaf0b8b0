"""Whether the word model should overrule the rules where both speak and disagree strongly (issue 23), measured
where neither had read the text: the rules as they stood before each wave (bench/rules_before_wave.py), the model
trained without that wave (guess_gate.held_out's way), the gate chosen wave by wave on the other waves.

Where the rules named a problem R, the override answers the model's kind K when P(R) <= LOW and P(K) >= HIGH; where
they named none, the shipped guess gates answer (guess_gate.answer). Declared before measuring: adopt only if the
held-out figure gains >= 20 of the wave records over no override, the weakest category's held-out share does not
drop, and no category loses more than 2 records.

Run (needs the `experiments` extra): PYTHONPATH=$PWD python bench/guess_override.py    (about five minutes)
"""

from __future__ import annotations

import itertools
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from guess_gate import answer, asked, held_out, wave_records, worth  # noqa: E402

import loratui.logic.word_guess as word_guess  # noqa: E402

LOW = (0.01, 0.02, 0.05, 0.1)
HIGH = (0.5, 0.6, 0.7, 0.8, 0.9)
SHIPPED = (word_guess.SPEAK_AT, None, word_guess.KIND_AT, 0.0)  # as shipped: no guess over a judged series


def overruled(b: dict, whole: dict, texts: dict, probs: dict, gate: tuple | None) -> str:
    """The answer with the override `gate` (LOW, HIGH), None for none."""
    if gate is not None and b["rules"] != "healthy":
        _, kinds = whole[b["file"]]
        top = max(kinds, key=kinds.get)
        if top != b["rules"] and kinds.get(b["rules"], 0.0) <= gate[0] and kinds[top] >= gate[1]:
            return top
    return answer(b, texts, probs, *SHIPPED)


def table(before: list[dict], whole: dict, texts: dict, probs: dict, gate: tuple | None) -> dict[str, list[int]]:
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for b in before:
        per[b["want"]][0] += overruled(b, whole, texts, probs, gate) == b["want"]
        per[b["want"]][1] += 1
    return per


def main() -> None:
    rows, before = wave_records()
    texts = asked([r for r in rows if r["file"] in {b["file"] for b in before}])
    probs = held_out(rows, before, texts)
    whole = held_out(rows, before, {})  # the whole text's probabilities, for the override
    gates: list[tuple | None] = [None, *itertools.product(LOW, HIGH)]
    base = table(before, whole, texts, probs, None)
    print(f"{len(before)} wave records; shipped guess gates {SHIPPED}: {worth(base)[1]} right, weakest "
          f"{worth(base)[0]:.3f}")
    for gate in gates[1:]:
        per = table(before, whole, texts, probs, gate)
        print(f"LOW {gate[0]:<5} HIGH {gate[1]:<4} {worth(per)[1]:>5} right, weakest {worth(per)[0]:.3f}")
    held: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    chosen: dict[object, int] = defaultdict(int)
    for wave in sorted({b["at"] for b in before}):
        rest = [b for b in before if b["at"] != wave]
        gate = max(gates, key=lambda g: worth(table(rest, whole, texts, probs, g)))
        chosen[gate] += 1
        for category, (right, n) in table([b for b in before if b["at"] == wave], whole, texts, probs, gate).items():
            held[category][0] += right
            held[category][1] += n
    print(f"\nchosen on the other waves, wave by wave: {dict(chosen)}")
    print(f"held out: {worth(held)[1]} of {len(before)} right (no override: {worth(base)[1]}), weakest category "
          f"{worth(held)[0]:.3f} (no override: {worth(base)[0]:.3f})")
    for category in sorted(held):
        print(f"  {category:24} {held[category][0]:4} / {held[category][1]}   (no override {base[category][0]})")


if __name__ == "__main__":
    main()
