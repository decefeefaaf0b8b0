"""What keeping events.idx current costs the supervisor's indexer (issue 15), on bench/replay_huge.py's log.

Plays the indexer (`loratui.sources.indexer`) against the log as it grows: copies the log into a fresh
file `--chunk-mb` at a time and updates the follower's index after each chunk (a follower, as the
indexer), then the end (update + save). Then the steady state: `--ticks` appends of one indexer interval's
worth of the log (5 s of this synthetic run, ~13 KB) to the finished index, each followed by an update:
the fixed cost of one tick at the end of a 1 GB log. Prints CPU seconds (`time.process_time`), saves and
the process's peak RSS.

    python bench/index_follow.py --log /tmp/huge/events.jsonl --work /tmp/huge-follow
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import time
from pathlib import Path

from loratui.sources import indexer, logindex
from loratui.sources.logindex import IndexedLog, idx_path

HOURS_PER_GB = 107.0  # bench/replay_huge.py's run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True, help="where the growing copy is written")
    parser.add_argument("--chunk-mb", type=float, default=4.0)
    parser.add_argument("--ticks", type=int, default=200)
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    path = args.work / "events.jsonl"
    size = args.log.stat().st_size
    saves = []
    real_save = logindex.save_index

    def counted(*a: object) -> bool:
        start = time.process_time()
        ok = real_save(*a)  # type: ignore[arg-type]
        saves.append(time.process_time() - start)
        return ok

    logindex.save_index = counted  # type: ignore[assignment]
    chunk = int(args.chunk_mb * 2**20)
    spent = 0.0
    with open(args.log, "rb") as src, open(path, "wb") as out:
        out.write(src.read(chunk))
        out.flush()
        log = IndexedLog.of_file(path)
        log.follower = True
        ticks = 0
        while True:
            start = time.process_time()
            log.update()
            spent += time.process_time() - start
            ticks += 1
            data = src.read(chunk)
            if not data:
                break
            out.write(data)
            out.flush()
    start = time.process_time()
    log.update()
    log.save()
    end_cost = time.process_time() - start
    spent += end_cost
    print(f"FOLLOW log={size / 1e9:.2f}GB updates={ticks} cpu_s={spent:.1f} saves={len(saves)} "
          f"save_cpu_s={sum(saves):.1f} last_save_s={saves[-1]:.2f} end_s={end_cost:.2f} "
          f"idx_mb={idx_path(path).stat().st_size / 1e6:.1f}")
    per_tick = int(size / (HOURS_PER_GB * size / 1e9 * 3600 / indexer.INTERVAL_S))
    with open(args.log, "rb") as src:
        src.seek(max(0, size - 200 * per_tick))
        tail = src.read()
    tail = tail[tail.index(b"\n") + 1:]
    costs = []
    with open(path, "ab") as out:
        pos = 0
        for _ in range(args.ticks):
            cut = tail.index(b"\n", pos + per_tick) + 1 if pos + per_tick < len(tail) else len(tail)
            out.write(tail[pos:cut])
            out.flush()
            pos = cut if cut < len(tail) else 0
            start = time.process_time()
            log.update()
            costs.append(time.process_time() - start)
    ticks_per_gb = HOURS_PER_GB * 3600 / indexer.INTERVAL_S
    median = statistics.median(costs)
    print(f"TICK bytes={per_tick} median_ms={median * 1e3:.2f} max_ms={max(costs) * 1e3:.1f} "
          f"ticks_per_gb={ticks_per_gb:.0f} cpu_s_per_gb_at_ticks={median * ticks_per_gb:.0f}")
    print(f"RSS peak_mib={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}")


if __name__ == "__main__":
    main()
