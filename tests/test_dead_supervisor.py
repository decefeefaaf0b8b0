"""A supervisor killed with SIGKILL (the OOM killer): the trainer trains on, obeys pause/resume/stop from
the command line, records its output and its own end, and every view says the truth (issue 15)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from loratui import events, rundir, runstatus
from loratui.sources.runlog import LiveSource
from loratui.supervisor import control
from tests.conftest import kinds, loratui, only_run, wait_for
from tests.test_run import _start_detached, start_and_reach

pytestmark = pytest.mark.slow


def _kill_supervisor(run: Path) -> None:
    pid = rundir.RunDir(run).supervisor_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: rundir.RunDir(run).supervisor_pid() is None, timeout=10)


def _states(run: Path) -> list[str]:
    return [str(e["state"]) for e in kinds(run, "state")]


def test_an_orphaned_trainer_obeys_the_cli_and_writes_its_own_end(runs_dir: Path) -> None:
    viewer, run = start_and_reach(runs_dir, max_steps=10, step=2)
    # Sent in-process (milliseconds): a CLI's start-up could outlast the 8 steps left on a fast machine.
    # The commands that matter here, after the supervisor's death, go through the CLI.
    control.send(rundir.RunDir(run).control, "pause")
    wait_for(lambda: "paused" in _states(run), timeout=60)
    _kill_supervisor(run)
    wait_for(lambda: any(e.get("key") == "supervisor_lost" for e in kinds(run, "notice")), timeout=15)
    listed = loratui("ls", "--runs-dir", str(runs_dir))
    assert "paused*" in listed.stdout  # the truth: paused, its supervisor gone
    steps_paused = len(kinds(run, "step"))
    time.sleep(1.0)
    assert len(kinds(run, "step")) == steps_paused  # still held
    resumed = loratui("resume", "--runs-dir", str(runs_dir))
    assert resumed.returncode == 0, resumed.stderr
    wait_for(lambda: kinds(run, "end"), timeout=400)
    (end,) = kinds(run, "end")
    assert end["state"] == events.FINISHED and end["step"] == 10
    assert any(e["stream"] == "stderr" for e in kinds(run, "output")[-5:]) or kinds(run, "output")
    # The orphan writes its end, then removes its pidfile: "alive" turns "" a moment after the end.
    wait_for(lambda: rundir.RunDir(run).trainer_pid() is None, timeout=30)
    status = runstatus.read(rundir.RunDir(run))
    assert status.state == events.FINISHED and status.alive == ""
    source = LiveSource(rundir.RunDir(run))
    batch = source.poll()
    assert batch.ended  # a viewer opened now does not hang on the dead supervisor's socket file
    viewer.kill()


def test_a_suspended_run_whose_supervisor_died_is_resumed_by_a_new_one(runs_dir: Path) -> None:
    viewer, run = start_and_reach(runs_dir, max_steps=8, step=3)
    control.send(rundir.RunDir(run).control, "suspend")  # in-process: lands before the last step
    wait_for(lambda: _states(run)[-1:] == ["suspended"] and rundir.RunDir(run).trainer_pid() is None, timeout=120)
    _kill_supervisor(run)
    assert runstatus.read(rundir.RunDir(run)).state == events.SUSPENDED
    resumed = loratui("resume", "--runs-dir", str(runs_dir))
    assert resumed.returncode == 0 and "new supervisor" in resumed.stdout, resumed.stderr
    wait_for(lambda: kinds(run, "end"), timeout=400)
    (end,) = kinds(run, "end")
    assert end["state"] == events.FINISHED
    assert max(int(e["step"]) for e in kinds(run, "step")) == 8
    viewer.kill()


def test_a_pause_sent_while_the_trainer_imports_is_obeyed(runs_dir: Path) -> None:
    viewer = _start_detached(runs_dir, "--max-steps", "30")
    run = wait_for(lambda: runs_dir.exists() and any(runs_dir.iterdir()) and only_run(runs_dir))
    assert isinstance(run, Path)
    wait_for(lambda: rundir.RunDir(run).supervisor_pid() is not None, timeout=30)
    sent = loratui("pause", "--runs-dir", str(runs_dir))
    assert sent.returncode == 0, sent.stderr
    assert not kinds(run, "train_begin")  # it really went in before the trainer could obey
    wait_for(lambda: "paused" in _states(run), timeout=120)
    assert max(int(e["step"]) for e in kinds(run, "step")) <= 2
    loratui("stop", "--runs-dir", str(runs_dir))
    wait_for(lambda: kinds(run, "end"), timeout=120)
    viewer.kill()


def test_a_supervisor_killed_after_its_trainer_exited_leaves_the_runs_true_outcome(runs_dir: Path) -> None:
    """The window between the trainer's exit and the supervisor's End, held open: the supervisor is frozen
    (SIGSTOP) while the trainer finishes and exits, then killed. Nobody writes the End, yet `ls`, the status
    and a viewer say `finished` (from the trainer's `exit` event), not `lost`."""
    viewer, run = start_and_reach(runs_dir, max_steps=6, step=1)
    supervisor = rundir.RunDir(run).supervisor_pid()
    assert supervisor is not None
    os.kill(supervisor, signal.SIGSTOP)
    try:
        wait_for(lambda: rundir.RunDir(run).trainer_pid() is None, timeout=300)
    finally:
        os.kill(supervisor, signal.SIGKILL)
    wait_for(lambda: rundir.RunDir(run).supervisor_pid() is None, timeout=10)
    assert not kinds(run, "end")
    assert " finished " in loratui("ls", "--runs-dir", str(runs_dir)).stdout
    status = runstatus.read(rundir.RunDir(run))
    assert (status.state, status.step) == (events.FINISHED, 6)
    source = LiveSource(rundir.RunDir(run))
    found = [e for _ in range(3) for e in source.poll().events]
    assert isinstance(found[-1], events.End) and found[-1].state == events.FINISHED
    viewer.kill()
