"""The word guess's gates, measured where neither the rules nor the model had read the text (issue 23).

For each wave's DEV records (bench/rules_before_wave.py: a batch file, scored by the code as it stood before the
batch was added): the rules' answer then; whether today's doctor would ask the guess, about which text, and whether
that text prints a series the rules judged (spied on `word_guess.guess`); and the probabilities of the two-stage
model of bench/train_word_model.py trained on every dev record but that wave's. Each gate (SPEAK_AT for prose,
SERIES_SPEAK_AT for a judged series) is applied where the rules said nothing, and the pair is then chosen wave by
wave on the other waves, to lift the weakest category first (then the total): the held-out figure is the honest one.
Sealed records are dropped as they are read (learned_cv.dev_rows), so no gate is chosen on them.

Run (needs the `experiments` extra): PYTHONPATH=$PWD python bench/guess_gate.py    (about five minutes on one core)
"""

from __future__ import annotations

import gzip
import itertools
import json
import re
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable
from typing import Any
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))
from learned_cv import dev_rows  # noqa: E402
from train_word_model import Fitted, fit  # noqa: E402

import loratui.logic.word_guess as word_guess  # noqa: E402
from loratui.commands import doctor  # noqa: E402

BEFORE = ROOT / "bench" / "results" / "rules_before_wave.jsonl.gz"
PROSE_WORD = re.compile(r"\b[A-Za-z]{2,}\b")
CJK = re.compile(r"[\u4e00-\u9fff\u3040-\u30ff\uac00-\ud7af]")
PROSE = (0.8, 0.9, 0.95)
SERIES = (None, 0.5, 0.6, 0.7, 0.8, 0.9)
KIND = (0.0, 0.15, 0.2, 0.3)
SERIES_KIND = (0.0, 0.2, 0.3)


def spied(rows: list[dict], seen: Callable[[list, str, bool], Any]) -> dict[str, Any]:
    """Per record file, `seen(items, text, series)` of what today's doctor hands `doctor._with_guess` (the rules' items,
    the text the guess would read, whether it prints a series the rules judged), for every record it hands one."""
    found: dict[str, Any] = {}
    calls: list[Any] = []
    real = doctor._with_guess
    doctor._with_guess = lambda items, text, series=False: calls.append(seen(items, text, series)) or items
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for row in rows:
                path = Path(tmp) / row["file"]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(row["text"].encode("utf-8"))
                calls.clear()
                doctor.diagnose(path, guess=True)
                if calls:
                    found[row["file"]] = calls[0]
    finally:
        doctor._with_guess = real
    return found


def asked(rows: list[dict]) -> dict[str, tuple[str, bool]]:
    """Per record file: the text today's doctor would hand the guess and whether it prints a series the rules
    judged (`spied`: it is handed both whether or not today's rules spoke; whether the guess is asked is decided by
    the rules as they were before the wave)."""
    return spied(rows, lambda items, text, series: (text, series))


def has_prose(text: str) -> bool:
    """Whether a line of the text is a sentence someone wrote (6 words, or 8 CJK characters), not a log record: a
    judged series is only read for its author's words (a bare log the rules found fine stays fine)."""
    return any(len(PROSE_WORD.findall(line)) >= 6 or len(CJK.findall(line)) >= 8 for line in text.splitlines())


def held_out(rows: list[dict], before: list[dict], texts: dict,
             fit: Callable[[list[dict]], Fitted] = fit) -> dict[str, tuple[float, dict[str, float]]]:
    """P(problem) and the kinds' probabilities for each wave record's guess text, from a model trained (`fit`:
    train_word_model's, or a variant of it) on every dev record but its wave's."""
    found = {}
    for wave in sorted({b["at"] for b in before}):
        files = {b["file"] for b in before if b["at"] == wave}
        model = fit([r for r in rows if r["file"] not in files])
        for name in files:
            text = texts[name][0] if texts.get(name) else next(r["text"] for r in rows if r["file"] == name)
            found[name] = model.predict(text)
    return found


def answer(b: dict, texts: dict, probs: dict, prose_at: float, series_at: float | None, prose_kind: float,
           series_kind: float) -> str:
    """What the doctor would answer under the gates where the rules before the wave said nothing (word_guess.guess's
    own gate: its length and words checks, kind_pick, has_prose); a text the doctor reads otherwise (a
    trainer_state.json, a notebook) keeps the rules' answer."""
    if b["rules"] != "healthy" or not texts.get(b["file"]):
        return b["rules"]
    text, series = texts[b["file"]]
    if len(text) > word_guess.MAX_CHARS or not word_guess.has_words(text):
        return b["rules"]
    if series and (series_at is None or not has_prose(text)):
        return b["rules"]
    picked = word_guess.kind_pick(*probs[b["file"]], series_at if series else prose_at,
                                  series_kind if series else prose_kind)
    return picked[0] if picked is not None else b["rules"]


def table(before: list[dict], texts: dict, probs: dict, gate: tuple) -> dict[str, list[int]]:
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for b in before:
        per[b["want"]][0] += answer(b, texts, probs, *gate) == b["want"]
        per[b["want"]][1] += 1
    return per


def worth(per: dict[str, list[int]]) -> tuple[float, int]:
    """The weakest category's share, then the total right."""
    return min(right / n for right, n in per.values()), sum(right for right, _ in per.values())


def wave_records() -> tuple[list[dict], list[dict]]:
    """The dev records, and each wave's records (a dev one) with the rules' answer before the wave."""
    rows = dev_rows()
    before = [json.loads(line) for line in gzip.decompress(BEFORE.read_bytes()).decode().splitlines() if line]
    known = {r["file"] for r in rows}
    return rows, [b for b in before if b["file"] in known]


def main() -> None:
    rows, before = wave_records()
    texts = asked([r for r in rows if r["file"] in {b["file"] for b in before}])
    probs = held_out(rows, before, texts)
    gates = list(itertools.product(PROSE, SERIES, KIND, SERIES_KIND))
    print(f"{len(before)} wave records from {len({b['at'] for b in before})} waves; rules before each wave right on "
          f"{sum(b['rules'] == b['want'] for b in before)}")
    print(f"{'SPEAK_AT':>8} {'SERIES':>6} {'KIND_AT':>7} {'SERIES_KIND':>11} {'right':>6} {'weakest':>8} "
          f"{'healthy kept':>13}")
    for gate in gates:
        per = table(before, texts, probs, gate)
        print(f"{gate[0]:>8} {gate[1]!s:>6} {gate[2]:>7} {gate[3]:>11} {worth(per)[1]:>6} {worth(per)[0]:>8.3f} "
              f"{per['healthy'][0]:>13}")
    held: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    chosen: dict[tuple, int] = defaultdict(int)
    for wave in sorted({b["at"] for b in before}):
        rest = [b for b in before if b["at"] != wave]
        gate = max(gates, key=lambda g: worth(table(rest, texts, probs, g)))
        chosen[gate] += 1
        for category, (right, n) in table([b for b in before if b["at"] == wave], texts, probs, gate).items():
            held[category][0] += right
            held[category][1] += n
    print(f"\nchosen on the other waves, wave by wave: {dict(chosen)}")
    print(f"held out: {worth(held)[1]} of {len(before)} right, weakest category {worth(held)[0]:.3f}")
    for category in sorted(held):
        print(f"  {category:24} {held[category][0]:4} / {held[category][1]}")


if __name__ == "__main__":
    main()
