"""Replay open and seek time on a generated 10-hour run log.

Writes a realistic log (10 Hz NVML samples, a step and a Trainer log per step, phases, evals, saves) to a
temp dir, then measures, in one process: read_log, the RunState fold, indexing the file (checkpoints of
state and advice) and seeks to random steps with their advice: before (advice folded from the first
event, as the replay did) and after (from the nearest checkpoint), side by side.

    python bench/replay_open.py            # 10 hours: ~360k samples, 50k steps
    python bench/replay_open.py --quick    # a small log, a few seconds (CI)
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from loratui import events
from loratui.eventlog import LogContents, LogTail, read_log
from loratui.logic.advisor import Advisor
from loratui.logic.runstate import RunState
from loratui.sources.logindex import IndexedLog
from loratui.sources.replay import Replay, gc_paused

GIB = 1 << 30


def _sample(t: float, used: int, rng: random.Random) -> events.Sample:
    return events.Sample(t=t, gpu=0, used_max=used + rng.randrange(1 << 26), used_last=used,
                         used_min=used - rng.randrange(1 << 26), total=141 * GIB,
                         util=rng.randrange(85, 100), n=10, procs={"4242": used - GIB}, run_pids=[4242])


def _step_events(t: float, step: int, steps: int, rng: random.Random) -> list[events.AnyEvent]:
    loss = 2.5 * math.exp(-step / (steps / 3)) + 0.8 + rng.random() * 0.1
    values: dict[str, events.Num] = {"loss": loss, "grad_norm": 0.5 + rng.random(),
                                     "learning_rate": 2e-4 * (1 - step / steps), "epoch": step / steps * 3}
    if step == steps // 2:
        values["loss"] = "NaN"  # one NaN, so events of note include one
    return [events.Step(t=t, step=step, epoch=step / steps * 3, step_time=0.72, tokens=4096,
                        tokens_seen=4096 * step, torch_allocated=20 * GIB, torch_reserved=24 * GIB,
                        peak_allocated=26 * GIB, peak_reserved=28 * GIB),
            events.Log(t=t + 1e-4, step=step, values=values)]


def _extras(t: float, step: int, steps: int) -> list[events.AnyEvent]:
    """Eval and save phases every tenth of the run."""
    if step % max(1, steps // 10):
        return []
    return [events.Phase(t=t, name="eval", edge="begin", step=step),
            events.Log(t=t + 0.1, step=step, values={"eval_loss": 1.0, "eval_runtime": 30.0}),
            events.Phase(t=t + 0.1, name="eval", edge="end", step=step),
            events.Phase(t=t + 0.2, name="save", edge="begin", step=step),
            events.Phase(t=t + 0.3, name="save", edge="end", step=step),
            events.Checkpoint(t=t + 0.3, step=step, path=f"checkpoints/checkpoint-{step}")]


def _head(t0: float, steps: int) -> list[events.AnyEvent]:
    return [events.Header(t=t0, schema=events.SCHEMA_VERSION, run_id="bench", recipe_hash="0", name="bench"),
            events.State(t=t0, state=events.STARTING),
            events.GpuInfo(t=t0, available=True, names=["NVIDIA H200"], totals=[141 * GIB], indices=[0]),
            events.TrainBegin(t=t0 + 30, max_steps=steps, num_epochs=3.0, device="cuda"),
            events.State(t=t0 + 30, state=events.TRAINING),
            events.Phase(t=t0 + 30, name="train", edge="begin")]


def write_log(path: Path, hours: float, steps: int, hz: float = 10.0) -> int:
    """Write the synthetic log; returns its size in bytes."""
    rng, t0 = random.Random(5), 1_800_000_000.0
    seconds, step_every = hours * 3600, hours * 3600 / steps
    found: list[events.AnyEvent] = _head(t0, steps)
    next_step, step = t0 + 30 + step_every, 1
    for i in range(int(seconds * hz)):
        t = t0 + i / hz
        while step <= steps and next_step <= t:
            found += _step_events(next_step, step, steps, rng) + _extras(next_step, step, steps)
            step, next_step = step + 1, next_step + step_every
        found.append(_sample(t, int((30 + 4 * math.sin(i / 300)) * GIB), rng))
    found.append(events.End(t=t0 + seconds, state=events.FINISHED, exit_code=0, step=steps))
    path.write_bytes(b"".join(events.encode(e) for e in found))
    return path.stat().st_size


def _per_line_read(path: Path) -> LogContents:
    """The reference reader: one decode per line (what read_log did before its bulk path)."""
    tail = LogTail(path)
    found = tail.poll(max_bytes=None)
    found.extend(tail.finish())
    return LogContents(found, tail.skipped, tail.unknown)


def _best(fn, repeat: int) -> tuple[float, object]:
    """Best wall time of `repeat` calls, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def _fold_paused(found: list[events.AnyEvent]) -> RunState:
    with gc_paused():
        return RunState().feed_all(found)


def _seek_before(log: IndexedLog, target: int) -> tuple[RunState, Advisor]:
    """A seek as it was before the advisor had checkpoints: state from a checkpoint, advice from event 0."""
    state = log.fold_at(target)[0]
    with gc_paused():
        advisor = Advisor(None)
        for start in range(0, target, 65536):
            advisor.feed_all(log.read(start, min(target, start + 65536)))
    return state, advisor


def _seeks(fn, targets: list[int]) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of each seek (CPU time holds on a shared machine under load; wall does not)."""
    wall, cpu = [], []
    for target in targets:
        start, start_cpu = time.perf_counter(), time.process_time()
        fn(target)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return wall, cpu


def _folds(found: Any, repeat: int) -> tuple[float, float, Any]:
    fold_s, _ = _best(lambda: RunState().feed_all(found), repeat)
    fold_paused_s, final = _best(lambda: _fold_paused(found), repeat)
    return fold_s, fold_paused_s, final


def measure(path: Path, repeat: int, seeks: int) -> dict[str, float]:
    """Every figure of the table, in seconds (seeks: median and max)."""
    read_s, contents = _best(lambda: read_log(path), repeat)
    per_line_s, _ = _best(lambda: _per_line_read(path), repeat)
    fold_s, fold_paused_s, final = _folds(contents.events, repeat)  # type: ignore[attr-defined]
    del contents  # the decoded events go before the index is built, so their memory is not counted twice
    log = IndexedLog.of_file(path, None, cache=False)
    index_s, _ = _best(log.update, 1)  # one streaming pass: blocks, steps, notes, checkpoints
    rng = random.Random(1)
    replay = Replay(log)
    targets = [replay.index_of_step(rng.randrange(1, final.step + 1)) for _ in range(seeks)]  # type: ignore[attr-defined]
    after, after_cpu = _seeks(log.fold_at, targets)
    before, before_cpu = _seeks(lambda t: _seek_before(log, t), targets[: max(3, seeks // 10)])
    return {"events": final.n_events, "read_s": read_s, "per_line_read_s": per_line_s, "fold_s": fold_s,  # type: ignore[attr-defined]
            "fold_paused_s": fold_paused_s, "open_s": read_s + fold_paused_s, "index_s": index_s,
            "seek_before_s": statistics.median(before), "seek_median_s": statistics.median(after),
            "seek_max_s": max(after), "seek_before_cpu_s": statistics.median(before_cpu),
            "seek_median_cpu_s": statistics.median(after_cpu), "seek_max_cpu_s": max(after_cpu)}


ROWS = [("read_log (bulk decode, GC paused)", "read_s"), ("read, one decode per line (before)", "per_line_read_s"),
        ("RunState fold, GC running", "fold_s"), ("RunState fold, GC paused", "fold_paused_s"),
        ("open to last frame (read + fold)", "open_s"),
        ("index the file (state+advice checkpoints)", "index_s"),
        ("seek+advice, advice from event 0 (before)", "seek_before_s"),
        ("seek+advice from a checkpoint, median", "seek_median_s"), ("seek+advice from a checkpoint, max", "seek_max_s"),
        ("  the same, CPU time: before", "seek_before_cpu_s"), ("  CPU time: after, median", "seek_median_cpu_s"),
        ("  CPU time: after, max", "seek_max_cpu_s")]


def report(fig: dict[str, float], size: int) -> None:
    """Print the table and the one-line result."""
    for label, key in ROWS:
        print(f"  {label:<44} {fig[key] * 1000:9.1f} ms")
    ms = {k: fig[k] * 1000 for k in fig}
    print(f"RESULT events={fig['events']:.0f} mb={size / 1e6:.1f} read_ms={ms['read_s']:.0f} "
          f"per_line_read_ms={ms['per_line_read_s']:.0f} read_speedup=x{fig['per_line_read_s'] / fig['read_s']:.2f} "
          f"fold_ms={ms['fold_s']:.0f} fold_paused_ms={ms['fold_paused_s']:.0f} open_ms={ms['open_s']:.0f} "
          f"index_ms={ms['index_s']:.0f} seek_before_ms={ms['seek_before_s']:.1f} "
          f"seek_median_ms={ms['seek_median_s']:.1f} seek_max_ms={ms['seek_max_s']:.1f} "
          f"seek_before_vs_after=x{fig['seek_before_s'] / fig['seek_median_s']:.0f} "
          f"seek_cpu_before_ms={ms['seek_before_cpu_s']:.1f} seek_cpu_median_ms={ms['seek_median_cpu_s']:.1f} "
          f"seek_cpu_max_ms={ms['seek_max_cpu_s']:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 20-minute log (CI)")
    args = parser.parse_args()
    hours, steps = (1 / 3, 2000) if args.quick else (10.0, 50_000)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.jsonl"
        start = time.perf_counter()
        size = write_log(path, hours, steps)
        gen_s = time.perf_counter() - start
        fig = measure(path, repeat=1 if args.quick else 3, seeks=20 if args.quick else 200)
    print(f"log: {hours:g} h, {fig['events']:,.0f} events, {size / 1e6:.1f} MB (generated in {gen_s:.1f} s)")
    report(fig, size)


if __name__ == "__main__":
    main()
