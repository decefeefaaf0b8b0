"""A watched launcher's ranks in sessions of their own: torchrun's agent starts each rank with `start_new_session`, so
the SIGSTOP of the command's process group (`p` on a command with no hooked Trainer) froze the agent alone, and the
run said `paused` while both ranks trained on (`loratui run -- torchrun --nproc_per_node 2 plain_loop.py`: steps 27
to 56 in 3 s of pause); the stop's last resort, SIGKILL of the group, would have left the ranks running without their
agent. Pause, resume and SIGKILL now reach the groups the command's processes lead; a stop's SIGTERM still goes to
the agent alone (it terminates its ranks itself).

The launcher here is a stand-in: a process leading its group that starts one "rank" in a new session."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from loratui import events, rundir
from tests.conftest import TINY, kinds, loratui, only_run, wait_for, watched_pids
from tests.test_alerts import _supervisor
from tests.test_dead_supervisor import _kill_supervisor

LAUNCHER = """
import subprocess, sys, time
rank = subprocess.Popen([sys.executable, "-c", "import time\\nwhile True: time.sleep(0.05)"], start_new_session=True)
print(rank.pid, flush=True)
for step in range(1, 100000):
    print(f"step {step} loss 1.0", flush=True)
    time.sleep(0.2)
"""


def _state(pid: int) -> str:
    """'T' for a stopped process, 'Z' for a dead one nobody reaped yet; '' when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]
    except (OSError, IndexError):
        return ""


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            psutil.Process(pid).kill()
        except psutil.Error:
            pass


def test_pause_resume_and_kill_reach_the_ranks_of_a_launcher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = rundir.RunSettings(run_id="20270115-093000-launch", name="launch", recipe_source="",
                                  command=[sys.executable, "-c", LAUNCHER], cwd=str(tmp_path))
    run = rundir.create(tmp_path / "runs", settings, TINY.read_text())
    sup = _supervisor(run, monkeypatch)
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdout=subprocess.PIPE, process_group=0)
    keeper = subprocess.Popen(["sleep", "120"])  # the command's parent in a real run
    rank = 0
    try:
        assert launcher.stdout is not None
        rank = int(launcher.stdout.readline())
        rundir.write_pidfile(run.trainer_pidfile, launcher.pid)
        sup.trainer, sup.state = keeper, events.TRAINING
        assert sup._signal_pause(True) is None
        wait_for(lambda: _state(launcher.pid) == "T" and _state(rank) == "T", timeout=30)
        assert sup._signal_pause(False) is None
        wait_for(lambda: _state(launcher.pid) not in ("T", "") and _state(rank) not in ("T", ""), timeout=30)
        assert sup._signal_trainer(keeper, signal.SIGKILL)
        wait_for(lambda: _state(rank) in ("Z", ""), timeout=30)  # not left running without its launcher
        assert sup.state == events.TRAINING and launcher.wait(timeout=30) == -signal.SIGKILL
    finally:
        _kill([launcher.pid, keeper.pid] + ([rank] if rank else []))
        for proc in (launcher, keeper):
            proc.wait()
        if launcher.stdout is not None:
            launcher.stdout.close()
        sup.unattended.close()
        sup.log.close()


def test_the_keeper_of_a_dead_supervisor_pauses_a_launchers_ranks(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    viewer = subprocess.Popen([sys.executable, "-m", "loratui", "run", "--headless", "--runs-dir", str(runs), "--",
                               sys.executable, "-c", LAUNCHER], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    wait_for(lambda: runs.exists() and any(runs.iterdir()))
    run = only_run(runs)
    rank = 0
    try:
        wait_for(lambda: kinds(run, "step"))
        rank = int(next(line for e in kinds(run, "output") for line in e["lines"] if line.isdigit()))  # type: ignore[attr-defined]
        _kill_supervisor(run)
        wait_for(lambda: any(e.get("key") == "supervisor_lost" for e in kinds(run, "notice")), timeout=30)
        said = loratui("pause", "--runs-dir", str(runs))
        assert said.returncode == 0, said.stdout + said.stderr
        wait_for(lambda: _state(rank) == "T", timeout=30)
        said = loratui("resume", "--runs-dir", str(runs))
        assert said.returncode == 0, said.stdout + said.stderr
        wait_for(lambda: _state(rank) not in ("T", ""), timeout=30)
    finally:
        _kill(watched_pids(run) + ([rank] if rank else []))
        viewer.kill()
        viewer.wait()
