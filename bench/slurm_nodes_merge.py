"""What a login node pays to view a many-node run (docs/ARCHITECTURE.md, "Beyond one host").

Writes a run directory as N nodes would (each its own log: header, GPU info, 8 GPUs sampled at 10 Hz for
`--seconds`, a step a second from 8 ranks), then times what a viewer does: the live tail's poll when nothing
changed (its cost every 0.2 s), a poll after every node grew by one second of events, and the one-time
merge that replay and doctor read. Prints one JSON line per N.

    python bench/slurm_nodes_merge.py --nodes 2 16 128 --seconds 60
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from loratui import events, nodelogs
from loratui.eventlog import EventWriter

GIB = 1 << 30


def node_events(node: int, t0: float, seconds: int) -> list[events.AnyEvent]:
    found: list[events.AnyEvent] = [
        events.Header(t=t0, schema=1, run_id=f"n{node}", recipe_hash="x", node=f"gpu{node:03d}",
                      slurm={"SLURM_JOB_ID": "1", "SLURM_NODEID": str(node)}),
        events.GpuInfo(t=t0, available=True, names=["H200"] * 8, totals=[140 * GIB] * 8, indices=list(range(8)))]
    for tick in range(seconds * 10):
        t = t0 + tick / 10
        found += [events.Sample(t=t, gpu=g, used_max=60 * GIB, used_last=60 * GIB, used_min=59 * GIB,
                                total=140 * GIB, util=97) for g in range(8)]
        if tick % 10 == 0:
            found += [events.Step(t=t, step=tick // 10, epoch=0.0, step_time=1.0, rank=node * 8 + r) for r in range(8)]
    return found


def write(path: Path, found: list[events.AnyEvent]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = EventWriter(path, fsync_interval=3600)
    for e in found:
        writer.write(e)
    writer.close()


def measure(nodes: int, seconds: int) -> dict[str, float]:
    run = Path(tempfile.mkdtemp(prefix="merge-"))
    t0 = time.time()
    write(run / "events.jsonl", node_events(0, t0, seconds))
    for node in range(1, nodes):
        write(run / "nodes" / f"gpu{node:03d}" / "events.jsonl", node_events(node, t0, seconds))
    tail = nodelogs.MergedTail(run)
    start = time.perf_counter()
    first = tail.poll()
    catch_up = time.perf_counter() - start
    idle = []
    for _ in range(20):
        tail._looked = -1e9  # count the directory listing too, as every DISCOVER_S
        start = time.perf_counter()
        tail.poll()
        idle.append(time.perf_counter() - start)
    more = {p: node_events(i, t0 + seconds, 1)[2:] for i, p in enumerate(
        [run / "events.jsonl", *(d / "events.jsonl" for d in nodelogs.node_dirs(run))])}
    for path, found in more.items():
        write(path, found)
    start = time.perf_counter()
    grown = tail.poll()
    one_second = time.perf_counter() - start
    start = time.perf_counter()
    merged = nodelogs.merged_log(run)
    merge_s = time.perf_counter() - start
    size = sum(p.stat().st_size for p in run.rglob("events.jsonl"))
    return {"nodes": nodes, "seconds_of_run": seconds, "logs_mib": round(size / 2**20, 1),
            "events": len(first), "catch_up_s": round(catch_up, 3), "idle_poll_ms": round(1000 * sorted(idle)[10], 2),
            "one_second_events": len(grown), "one_second_poll_ms": round(1000 * one_second, 1),
            "merge_once_s": round(merge_s, 2), "merged_mib": round(merged.stat().st_size / 2**20, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 16, 128])
    parser.add_argument("--seconds", type=int, default=60)
    args = parser.parse_args()
    for n in args.nodes:
        print(json.dumps(measure(n, args.seconds)), flush=True)


if __name__ == "__main__":
    main()
