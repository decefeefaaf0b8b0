"""The doctor's answers on the dev rows neither learned model has read (issue 23): for every dev record of the waves
from `--from` on (the shipped word model W14 was trained through wave 88, the arbiter on fewer), the rules' answer
and the final answer of the code on PYTHONPATH, with the truth, the tool and the wave; written as JSON, and compared
with another such map (`--against`): overall, per category, and the rows whose final answer moved.

It is where the thirtieth session read its largest confusions (the rules' answer against the final one) and measured
its guards held out (docs/learned_fallback.md). Sealed records are dropped as they are read.

    PYTHONPATH=$PWD python bench/held_out_map.py --out /tmp/map.json [--from 89] [--against OLD.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def rows(first_wave: int) -> list[dict]:
    found = []
    for path in sorted((ROOT / "tests" / "data" / "real").glob("batch-col*.jsonl")):
        wave = re.match(r"batch-col(\d+)", path.name)
        if wave is None or int(wave.group(1)) < first_wave:
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line) if line.strip() else None
            if record is not None and record.get("split") != "sealed":
                found.append(dict(record, wave=int(wave.group(1))))
    return found


def mapped(records: list[dict]) -> dict[str, list]:
    from test_corpus import top_category

    from loratui.commands.doctor import diagnose

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "paste.txt"
        for r in records:
            path.write_bytes(r["text"].encode())
            out[r["file"]] = [top_category(diagnose(path, guess=False)[0]), top_category(diagnose(path, guess=True)[0]),
                              r["category"], r["tool"], r["wave"]]
    return out


def compare(old: dict[str, list], new: dict[str, list]) -> None:
    shared = [f for f in old if f in new]
    truth = Counter(old[f][2] for f in shared)
    right = {name: Counter(m[f][2] for f in shared if m[f][1] == m[f][2]) for name, m in (("old", old), ("new", new))}
    print(f"{len(shared)} rows: {sum(right['old'].values())} -> {sum(right['new'].values())} right "
          f"(rules alone {sum(old[f][0] == old[f][2] for f in shared)} -> {sum(new[f][0] == new[f][2] for f in shared)})")
    for category in sorted(truth):
        if right["old"][category] != right["new"][category]:
            print(f"  {category}: {right['old'][category]} -> {right['new'][category]} of {truth[category]}")
    for f in shared:
        if old[f][1] != new[f][1]:
            print(f"    {f}: {old[f][1]} -> {new[f][1]} (truth {old[f][2]})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="first", type=int, default=89, help="the first wave read (default 89)")
    parser.add_argument("--out", type=Path, required=True, help="where the map is written (JSON)")
    parser.add_argument("--against", type=Path, help="an earlier map to compare with")
    args = parser.parse_args()
    found = mapped(rows(args.first))
    args.out.write_text(json.dumps(found), encoding="utf-8")
    right = sum(v[1] == v[2] for v in found.values())
    print(f"{len(found)} dev rows of waves {args.first}+: rules {sum(v[0] == v[2] for v in found.values())}, "
          f"final {right}")
    if args.against is not None:
        compare(json.loads(args.against.read_text(encoding="utf-8")), found)


if __name__ == "__main__":
    main()
