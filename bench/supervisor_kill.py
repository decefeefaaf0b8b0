"""Kill the supervisor with SIGKILL mid-run N times (issue 15) and count what holds.

Each round: a tiny CPU run of 6 steps; at step 2 the supervisor gets SIGKILL; then `loratui pause`,
`loratui resume` through the orphaned trainer; the run must end `finished` with its own end event,
`ls` must say so, and a viewer's source must see the end. Prints one line a round and a summary.

    python bench/supervisor_kill.py --rounds 10
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loratui import rundir, runstatus  # noqa: E402
from loratui.sources.runlog import LiveSource  # noqa: E402

TINY = Path(__file__).resolve().parent.parent / "recipes" / "tiny.toml"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loratui", *args], capture_output=True, text=True, timeout=120)


def kinds(run: Path, kind: str) -> list[dict[str, object]]:
    try:
        lines = (run / "events.jsonl").read_text().splitlines()
    except FileNotFoundError:
        return []
    return [e for e in (json.loads(x) for x in lines if x.strip().startswith("{")) if e.get("kind") == kind]


def wait(predicate: object, timeout: float = 300) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.2)
    return False


def one_round(runs: Path) -> dict[str, object]:
    viewer = subprocess.Popen([sys.executable, "-m", "loratui", "run", str(TINY), "--headless", "--max-steps",
                               "6", "--runs-dir", str(runs)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    wait(lambda: runs.exists() and any(runs.iterdir()))
    run = next(runs.iterdir())
    wait(lambda: any(int(e["step"]) >= 2 for e in kinds(run, "step")))  # type: ignore[call-overload]
    os.kill(rundir.RunDir(run).supervisor_pid() or 0, signal.SIGKILL)
    lost_seen = wait(lambda: any(e.get("key") == "supervisor_lost" for e in kinds(run, "notice")), 20)
    paused = cli("pause", "--runs-dir", str(runs)).returncode == 0 and wait(
        lambda: any(e["state"] == "paused" for e in kinds(run, "state")), 120)
    resumed = cli("resume", "--runs-dir", str(runs)).returncode == 0
    wait(lambda: kinds(run, "end"), 300)
    end = kinds(run, "end")
    listed = cli("ls", "--runs-dir", str(runs)).stdout
    viewer.kill()
    return {"notice": lost_seen, "pause": paused, "resume": resumed, "end": end[0]["state"] if end else None,
            "ends": len(end), "ls_finished": " finished " in listed,
            "viewer_sees_end": LiveSource(rundir.RunDir(run)).poll().ended,
            "status": runstatus.read(rundir.RunDir(run)).state}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    results = []
    for i in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            result = one_round(Path(tmp) / "runs")
        results.append(result)
        print(i, json.dumps(result), flush=True)
    good = sum(r["end"] == "finished" and r["ends"] == 1 and r["pause"] and r["resume"] and r["ls_finished"]
               and r["viewer_sees_end"] for r in results)
    print(f"supervisor SIGKILL x{args.rounds}: {good}/{args.rounds} rounds with pause+resume obeyed, one end "
          "event (finished), ls and a viewer truthful")


if __name__ == "__main__":
    main()
