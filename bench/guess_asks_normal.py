"""Whether the word guess should stay silent where the text asks whether what it shows is normal (issue 23).

A person who asks `is this normal?` about a loss, a memory figure or a warning was most often told yes (healthy) by
the maintainers; where no rule found a problem, the word model may still name one. This measures, held out as
bench/guess_gate.py does (the rules as they stood before each wave, a model trained without the wave, today's gates
from logic/word_guess.py), the doctor's answers with the guess as it is and with the guess withheld from texts that
match core.ASKS_NORMAL (the advisor's one notion of the question). Sealed records are never read.

Run (needs the `experiments` extra): PYTHONPATH=$PWD python bench/guess_asks_normal.py    (about five minutes)
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import guess_gate  # noqa: E402

from loratui.logic import word_guess  # noqa: E402
from loratui.logic.advisor.core import ASKS_NORMAL  # noqa: E402


def main() -> None:
    rows, before = guess_gate.wave_records()
    texts = guess_gate.asked([r for r in rows if r["file"] in {b["file"] for b in before}])
    probs = guess_gate.held_out(rows, before, texts)
    gate = (word_guess.SPEAK_AT, None, word_guess.KIND_AT, 0.0)  # today's: no guess on a judged series
    full = {r["file"]: r["text"] for r in rows}
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # as it is, withheld where asked, records
    asked = 0
    for b in before:
        now = guess_gate.answer(b, texts, probs, *gate)
        ask = ASKS_NORMAL.search(full[b["file"]]) is not None
        asked += ask
        withheld = b["rules"] if ask else now
        per[b["want"]][0] += now == b["want"]
        per[b["want"]][1] += withheld == b["want"]
        per[b["want"]][2] += 1
    print(f"{len(before)} wave records, {asked} of them ask whether it is normal; gates {gate}")
    print(f"{'category':24} {'as is':>6} {'withheld':>8} {'of':>5}")
    for category in sorted(per):
        print(f"{category:24} {per[category][0]:6} {per[category][1]:8} {per[category][2]:5}")
    print(f"{'all':24} {sum(v[0] for v in per.values()):6} {sum(v[1] for v in per.values()):8} {len(before):5}")


if __name__ == "__main__":
    main()
