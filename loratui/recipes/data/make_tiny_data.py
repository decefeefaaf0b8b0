"""Writes tiny-instructions.jsonl: a small, deterministic instruction set whose loss visibly falls.

Run: python loratui/recipes/data/make_tiny_data.py  (the output is committed; this is how it was made)
"""

import json
import random
from collections.abc import Iterator
from pathlib import Path

WORDS = ("apple river stone cloud tiger lemon piano rocket garden silver window candle forest "
         "planet butter violet shadow marble copper winter summer orange yellow purple bridge").split()
COLOURS = {"sky": "blue", "grass": "green", "snow": "white", "coal": "black", "blood": "red",
           "banana": "yellow", "orange": "orange", "violet": "purple"}


def examples(rng: random.Random) -> Iterator[dict[str, str]]:
    word = rng.choice(WORDS)
    a, b = rng.randint(0, 49), rng.randint(0, 49)
    thing = rng.choice(sorted(COLOURS))
    yield {"instruction": f"Reverse the word: {word}", "input": "", "output": word[::-1]}
    yield {"instruction": f"Write in capital letters: {word}", "input": "", "output": word.upper()}
    yield {"instruction": "Add the two numbers.", "input": f"{a} and {b}", "output": str(a + b)}
    yield {"instruction": f"What colour is {thing}?", "input": "", "output": f"{thing} is {COLOURS[thing]}."}
    yield {"instruction": "Count the letters.", "input": word, "output": f"{word} has {len(word)} letters."}


def main() -> None:
    rng = random.Random(0)
    rows: list[dict[str, str]] = []
    while len(rows) < 600:
        rows.extend(examples(rng))
    out = Path(__file__).with_name("tiny-instructions.jsonl")
    out.write_text("".join(json.dumps(r) + "\n" for r in rows[:600]), encoding="utf-8")


if __name__ == "__main__":
    main()
