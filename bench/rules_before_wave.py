"""The rules' answer on each wave's DEV records as the code stood before that wave was read (issue 23's honest
measure of the rules: bench/guess_gate.py combines them with the word model).

A wave is a batch file (tests/data/real/batch-*.jsonl); the code before it is the parent of the commit that added
the file. Each such commit is checked out in a temporary git worktree and its own `doctor.diagnose` (rules alone) and
its own tests/test_corpus.py scoring run on the batch's dev records as they are in this tree (sealed records are
dropped as they are read). Writes bench/results/rules_before_wave.jsonl.gz: one line per record (the commit, the
batch, the file, the category, the rules' answer, and every item they gave as [advice id, severity]), no text.

Run: python bench/rules_before_wave.py    (about a minute per 30 waves; needs git and the repository's history)
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "rules_before_wave.jsonl.gz"
SCORE = r"""
import json, sys, tempfile
from pathlib import Path
sys.path.insert(0, str(Path.cwd() / "tests"))
from test_corpus import top_category
from loratui.commands.doctor import diagnose
with tempfile.TemporaryDirectory() as tmp:
    for batch in sys.argv[1:]:
        for line in open(batch, encoding="utf-8"):
            row = json.loads(line) if line.strip() else {}
            if row.get("split") != "dev":
                continue
            path = Path(tmp) / row["file"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(row["text"].encode("utf-8"))
            try:
                items = diagnose(path)[0]
                rules = top_category(items)
                said = [[item.id, str(item.severity)] for item in items]
            except Exception as exc:
                rules, said = "crash: " + type(exc).__name__, []
            print(json.dumps({"batch": Path(batch).name, "file": row["file"], "want": row["category"],
                              "rules": rules, "said": said}), flush=True)
"""


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


def waves() -> dict[str, list[Path]]:
    """The batch files by the commit the code stood at before each was added."""
    found: dict[str, list[Path]] = defaultdict(list)
    for batch in sorted((ROOT / "tests" / "data" / "real").glob("batch-*.jsonl")):
        added = git("log", "--diff-filter=A", "--format=%H", "--", str(batch.relative_to(ROOT))).splitlines()
        if added:
            found[git("rev-parse", added[-1] + "^")].append(batch)
    return found


def main() -> None:
    lines = []
    found = waves()
    for commit, batches in found.items():
        with tempfile.TemporaryDirectory() as tmp:
            tree = Path(tmp) / "tree"
            git("worktree", "add", "--quiet", "--detach", str(tree), commit)
            try:
                done = subprocess.run([sys.executable, "-c", SCORE, *map(str, batches)], cwd=tree, text=True,
                                      capture_output=True, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"})
                lines += [json.dumps({"at": commit[:8], **json.loads(line)}) for line in done.stdout.splitlines()]
            finally:
                git("worktree", "remove", "--force", str(tree))
        print(f"{commit[:8]}: {len(batches)} batches", file=sys.stderr)
    OUT.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))
    print(f"{OUT.relative_to(ROOT)}: {len(lines)} dev records from {len(found)} waves")


if __name__ == "__main__":
    main()
