"""Replay of a huge log (issue 15): a generated ~1 GB events.jsonl (~5 M events, ~107 hours).

Writes the log (streamed: never held whole) to --dir, then times, each in its own process under
/usr/bin/time (wall, CPU, peak RSS): `replay --summary` without and with the saved index (events.idx),
and the replay app (Textual's headless driver) from start to its first frame and to `G` (the end
shown), without and with the index.

    python bench/replay_huge.py --dir /tmp/huge            # 1 GB (minutes)
    python bench/replay_huge.py --dir /tmp/huge --gb 0.05  # a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

HOURS_PER_GB = 107.0
STEPS_PER_HOUR = 5000


def write_log(path: Path, hours: float) -> int:
    """The bench/replay_open.py log, `hours` long, written a minute at a time."""
    from replay_open import GIB, _extras, _head, _sample, _step_events

    from loratui import events

    rng, t0 = random.Random(5), 1_800_000_000.0
    steps = int(hours * STEPS_PER_HOUR)
    seconds, step_every = hours * 3600, hours * 3600 / steps
    next_step, step = t0 + 30 + step_every, 1
    with open(path, "wb") as out:
        out.write(b"".join(events.encode(e) for e in _head(t0, steps)))
        for minute in range(int(seconds / 60)):
            chunk: list[events.AnyEvent] = []
            for i in range(minute * 600, (minute + 1) * 600):
                t = t0 + i / 10
                while step <= steps and next_step <= t:
                    chunk += _step_events(next_step, step, steps, rng) + _extras(next_step, step, steps)
                    step, next_step = step + 1, next_step + step_every
                chunk.append(_sample(t, int((30 + 4 * math.sin(i / 300)) * GIB), rng))
            out.write(b"".join(events.encode(e) for e in chunk))
        out.write(events.encode(events.End(t=t0 + seconds, state=events.FINISHED, exit_code=0, step=steps)))
    return path.stat().st_size


def timed(args: list[str]) -> tuple[float, float, float, str]:
    """(wall s, user+sys CPU s, peak RSS MiB, stdout) of one command."""
    done = subprocess.run(["/usr/bin/time", "-f", "TIME %e %U %S %M", *args], capture_output=True, text=True,
                          check=True)
    line = next(x for x in done.stderr.splitlines() if x.startswith("TIME "))
    wall, user, system, rss = (float(v) for v in line.split()[1:])
    return wall, user + system, rss / 1024, done.stdout


async def _frames(log_path: Path) -> None:
    """In-process: the app over the log; print seconds (from after the imports) to the first frame with an
    event (the header), to the first frame with events past it (from the index: loaded, or being built),
    and to `G` shown."""
    from loratui.sources.logindex import IndexedLog
    from loratui.tui.replay_app import replay_app

    start = time.perf_counter()
    log = IndexedLog.of_file(log_path)
    app = replay_app(log, None, "huge", speed=10)
    async with app.run_test(size=(120, 40)) as pilot:
        while app.run_state.n_events == 0:
            await pilot.pause(0.01)
        first = time.perf_counter() - start
        while app.run_state.n_events <= 1:
            await pilot.pause(0.01)
        filled = time.perf_counter() - start
        await pilot.press("G")
        while app.run_state.end is None:
            await pilot.pause(0.05)
        end = time.perf_counter() - start
    print(f"FRAMES first_s={first:.2f} filled_s={filled:.2f} end_s={end:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True, help="where the log is written (kept for reruns)")
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--frames", type=Path, help=argparse.SUPPRESS)  # the child process of the app figure
    args = parser.parse_args()
    if args.frames:
        asyncio.run(_frames(args.frames))
        return
    args.dir.mkdir(parents=True, exist_ok=True)
    log, idx = args.dir / "events.jsonl", args.dir / "events.idx"
    if not log.exists():
        start = time.perf_counter()
        size = write_log(log, HOURS_PER_GB * args.gb)
        print(f"wrote {log}: {size / 1e9:.2f} GB in {time.perf_counter() - start:.0f} s")
    print(f"log {log.stat().st_size / 1e9:.2f} GB")
    summary = [sys.executable, "-m", "loratui", "replay", str(log), "--summary"]
    frames = [sys.executable, str(Path(__file__).resolve()), "--dir", str(args.dir), "--frames", str(log)]
    for label, command, cold in [("summary, no index (builds it)", summary, True),
                                 ("summary, index saved", summary, False),
                                 ("app first frame and G, no index", frames, True),
                                 ("app first frame and G, index saved", frames, False)]:
        if cold:
            idx.unlink(missing_ok=True)
        wall, cpu, rss, out = timed(command)
        extra = out.strip().splitlines()[-1] if command is frames else ""
        print(f"  {label:<38} wall {wall:7.1f} s  cpu {cpu:7.1f} s  peak RSS {rss:7.0f} MiB  {extra}")
    print(f"index {idx.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
