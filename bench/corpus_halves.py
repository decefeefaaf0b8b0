"""Score the doctor on the real corpus with the dev split cut in two halves, to see whether a rule carries.

Rules are written from the *learn* half of dev; the *check* half is read by counts alone, like the sealed split,
so a rule that lifts learn but not check has learned its excerpts, not the kind of text. The halves are fixed by
a hash of the source URL (a different hash from the sealed split's), so no one chooses them.

    python bench/corpus_halves.py                 # learn and check tables, learn-half misses
    python bench/corpus_halves.py --files tests/data/real/batch-colL.jsonl   # one batch, e.g. fresh text

The sealed split is never printed here beyond its counts (`--sealed`).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def corpus_module():
    """tests/test_corpus.py, loaded by path (tests/ is not a package): its readers and scorer are the test's own."""
    spec = importlib.util.spec_from_file_location("corpus_test", ROOT / "tests" / "test_corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def half(source: str) -> str:
    """`check` for about half of the dev sources, by a hash of the URL that the sealed split does not use."""
    digest = int(hashlib.sha256(("check:" + source).encode()).hexdigest(), 16)
    return "check" if digest % 2 == 0 else "learn"


def write_excerpts(rows: list[dict], root: Path) -> None:
    for row in rows:
        path = root / row["file"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(row["text"].encode("utf-8"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", nargs="*", type=Path, help="score only these JSONL files' records")
    parser.add_argument("--sealed", action="store_true", help="also print the sealed split's counts")
    parser.add_argument("--no-guess", action="store_true", help="the rules alone, without the word model's guess")
    args = parser.parse_args()
    corpus = corpus_module()
    rows = corpus.ROWS if not args.files else [row for path in args.files for _, row in corpus.read_records(path)]
    groups: dict[str, list[dict]] = {"learn": [], "check": [], "sealed": []}
    for row in rows:
        key = "sealed" if corpus.split_of(row) == "sealed" else half(row["source"])
        groups[key].append(row)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_excerpts(rows, root)
        for name in ("learn", "check") + (("sealed",) if args.sealed else ()):
            if not groups[name]:
                continue
            table, misses = corpus.score(groups[name], root, guess=not args.no_guess)
            print("\n".join(corpus.render(f"dev-{name}" if name != "sealed" else name, table)))
            if name == "learn":
                print("learn misses:\n" + "\n".join(misses))
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
