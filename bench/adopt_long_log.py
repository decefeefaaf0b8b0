"""What taking over a long run costs: a watched command's log of --lines lines (default 200k), adopted.

Writes a watched command's run directory (its log: the header, a TrainBegin, then for each printed `step N loss X`
line its Output, Step and Log events and a few GPU samples; its trainer.stdout.log) and times, each in a fresh
process (CPU seconds, wall, peak RSS):

- `supervisor`: a new supervisor adopting the run (`loratui resume` of a suspended run whose supervisor died, a
  requeued Slurm job): `Supervisor(run, adopt=True)`, which folds the run's history for its status and alerts;
- `keeper`: a watched command's keeper standing in for its dead supervisor: the printed output the log recorded, fed
  to a reader again for its phase and step, and where to go on reading the output files;
- `attach`: what the app's attach does with the history (`LoratuiApp._fold`: every event through RunState and the
  Advisor, on the event loop), without the UI;
- `index_build` / `index_end`: the same state from the run's index (`IndexedLog.of_file`, then `fold_at` its end):
  the first builds and saves events.idx (what the supervisor's indexer keeps current while the run goes), the second
  loads it, as a take-over could;
- `status`: `runstatus.read`, what `ls` and attach read (status.json plus the log after its offset), for scale.

    python bench/adopt_long_log.py --dir /tmp/adopt200k
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def write_run(base: Path, lines: int) -> Path:
    """A watched command's run directory whose log holds about `lines` lines."""
    from loratui import events, rundir

    base.mkdir(parents=True, exist_ok=True)
    settings = rundir.RunSettings(run_id="adopt-bench", name="bench", recipe_source="", recipe_dir=str(base),
                                  command=[sys.executable, "train.py"], cwd=str(base))
    placeholder = ('[model]\npath = "<watched>"\n\n[data]\ndataset = "<watched>"\n\n[monitor]\nwarn_gb = 30.0\n')
    runs = base / "runs"
    for old in runs.glob("*/") if runs.exists() else []:
        import shutil

        shutil.rmtree(old)
    run = rundir.create(runs, settings, placeholder)
    rng, t = random.Random(3), 1_800_000_000.0
    per_step = 6  # Output, Step, Log and 3 samples
    steps = max(1, (lines - 3) // per_step)
    printed = []
    with open(run.events, "wb") as out:
        out.write(events.encode(events.Header(t=t, schema=1, run_id=settings.run_id, recipe_hash="", name="bench",
                                                   created="", loratui_version="bench",
                                                   command=settings.command, cwd=str(base))))
        out.write(events.encode(events.State(t=t, state=events.TRAINING, reason="steps read from the "
                                                  "command's output")))
        out.write(events.encode(events.TrainBegin(t=t, max_steps=steps, num_epochs=0.0, controls=["pause"],
                                                       pause_mode="signal")))
        for step in range(1, steps + 1):
            t += 0.5
            loss = 3.0 * 0.9999 ** step + rng.random() * 0.05
            line = f"step {step} loss {loss:.4f}"
            printed.append(line)
            out.write(events.encode(events.Output(t=t, stream="stdout", lines=[line])))
            out.write(events.encode(events.Step(t=t, step=step, epoch=0.0, step_time=0.5)))
            out.write(events.encode(events.Log(t=t, step=step, values={"loss": round(loss, 4)})))
            for k in range(3):
                out.write(events.encode(events.Sample(t=t + k * 0.1, gpu=0, used_max=20 << 30, used_last=20 << 30, used_min=20 << 30, total=80 << 30, util=95)))
    run.stdout_log.write_text("\n".join(printed) + "\n")
    run.stderr_log.write_text("")
    return run.path


def _supervisor(path: Path) -> dict[str, object]:
    from loratui.rundir import RunDir
    from loratui.supervisor.owner import Supervisor

    supervisor = Supervisor(RunDir(path), None, "", adopt=True)
    return {"step": supervisor.status.step}


def _keeper(path: Path) -> dict[str, object]:
    from loratui.rundir import RunDir
    from loratui.supervisor import keeper

    run = RunDir(path)
    stand_in = keeper.Keeper(run, [sys.executable, "train.py"])
    stand_in.log = None
    started = []
    keeper.follow_streams = lambda *args, **kwargs: started.append(kwargs.get("starts"))  # type: ignore[assignment]
    stand_in._adopt()
    watcher = stand_in._watcher
    return {"step": watcher.step if watcher else None, "starts": started[0] if started else None}


def _status(path: Path) -> dict[str, object]:
    from loratui import runstatus
    from loratui.rundir import RunDir

    return {"step": runstatus.read(RunDir(path)).step}


def _attach(path: Path) -> dict[str, object]:
    from loratui.eventlog import read_log
    from loratui.logic.advisor import Advisor
    from loratui.logic.runstate import RunState
    from loratui.rundir import RunDir

    recipe, _ = RunDir(path).load_recipe()
    state, advisor = RunState(), Advisor(recipe)
    for event in read_log(path / "events.jsonl").events:
        state.feed(event)
        advisor.feed(event)
    return {"step": state.step, "advice": [item.id for item in advisor.items()]}


def _index(path: Path) -> dict[str, object]:
    from loratui.rundir import RunDir
    from loratui.sources.logindex import IndexedLog

    recipe, _ = RunDir(path).load_recipe()
    log = IndexedLog.of_file(path / "events.jsonl", recipe)
    log.update()
    log.save()
    state, advisor = log.fold_at(log.n_events)
    return {"step": state.step, "advice": [item.id for item in advisor.items()]}


def child(kind: str, path: Path) -> None:
    cpu, wall = time.process_time(), time.perf_counter()
    found = {"supervisor": _supervisor, "keeper": _keeper, "status": _status, "attach": _attach,
             "index_build": _index, "index_end": _index}[kind](path)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"kind": kind, "cpu_s": round(time.process_time() - cpu, 3),
                      "wall_s": round(time.perf_counter() - wall, 3), "peak_rss_mib": round(rss, 1), **found}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]))
        return
    path = write_run(args.dir, args.lines)
    size = (path / "events.jsonl").stat().st_size
    with open(path / "events.jsonl", "rb") as handle:
        count = sum(1 for _ in handle)
    print(json.dumps({"log_lines": count, "log_mib": round(size / 2**20, 1)}))
    for kind in ("status", "supervisor", "keeper", "attach", "index_build", "index_end"):
        result = subprocess.run([sys.executable, __file__, "--dir", str(args.dir), "--child", kind, str(path)],
                                capture_output=True, text=True, cwd=ROOT, check=False)
        print(result.stdout.strip() or result.stderr[-2000:])


if __name__ == "__main__":
    main()
