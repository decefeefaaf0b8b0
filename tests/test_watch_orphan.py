"""A watched command whose supervisor is killed with SIGKILL (issue 25 item 11): like a recipe run's trainer,
it trains on, obeys `loratui pause/resume/stop` from the command line, its output and its end are recorded
(by its keeper, supervisor/keeper.py: nothing of loratui runs in the user's process for it), and `ls` never
says `lost`."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest

from loratui import events, rundir, runstatus
from loratui.supervisor.command import pause_words
from tests.conftest import kinds, loratui, wait_for, watched_pids
from tests.test_dead_supervisor import _kill_supervisor as kill_supervisor
from tests.test_watch_runs import (  # noqa: F401 - fixtures
    ENV, SCRIPTS, _holds, _run, _seed, _settled, _start, _steps, _wait_step, model_dir, watch_dir)

pytestmark = pytest.mark.slow


def _kill_supervisor(run: Path) -> None:
    """SIGKILL the supervisor (as test_dead_supervisor does), then wait until the keeper has noticed."""
    kill_supervisor(run)
    wait_for(lambda: any(e.get("key") == "supervisor_lost" for e in kinds(run, "notice")), timeout=30)


def _cli(runs: Path, *args: str) -> None:
    result = loratui(*args, "--runs-dir", str(runs), env=ENV)
    assert result.returncode == 0, result.stderr


def _status(run: Path) -> runstatus.Status:
    return runstatus.read(rundir.RunDir(run))


def test_a_plain_loop_outlives_its_supervisor_obeys_the_cli_and_ends_recorded(watch_dir: Path) -> None:  # noqa: F811
    viewer = _start(watch_dir, sys.executable, str(SCRIPTS / "plain_loop.py"), "3000")
    run = _run(watch_dir)
    _wait_step(run, 3)
    _kill_supervisor(run)
    assert _status(run).alive == "trainer" and _status(run).state == events.TRAINING  # not `lost`
    _cli(watch_dir, "pause")
    pids = watched_pids(run)
    wait_for(lambda: all(Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "T" for pid in pids), timeout=30)
    wait_for(lambda: _status(run).state == events.PAUSED, timeout=30)  # recorded just after the signal
    held = pause_words(bool(kinds(run, "header")[0].get("gpu_totals")))[0]  # the keeper's words: what this box holds
    assert [e for e in kinds(run, "state") if e["state"] == events.PAUSED][-1]["reason"] == held
    _settled(run)  # lines printed before the stop still reach the log
    _holds(run, 1.5)  # a step takes 0.1 s
    _cli(watch_dir, "resume")
    wait_for(lambda: _status(run).state == events.TRAINING, timeout=30)
    before = max(_steps(run))
    wait_for(lambda: max(_steps(run)) > before, timeout=60)  # steps still read from its output
    _cli(watch_dir, "stop")
    wait_for(lambda: kinds(run, "end"), timeout=120)
    (end,) = kinds(run, "end")
    assert end["state"] == events.STOPPED and end["step"] >= before
    wait_for(lambda: not watched_pids(run) and _status(run).alive == "", timeout=60)
    assert _status(run).state == events.STOPPED
    viewer.kill()


def test_a_hooked_trainer_outlives_its_supervisor_and_stops_from_the_cli(model_dir: Path, watch_dir: Path,  # noqa: F811
                                                                          tmp_path: Path) -> None:
    viewer = _start(watch_dir, *_seed(model_dir, tmp_path / "out", 3000))
    run = _run(watch_dir)
    _wait_step(run, 2)
    _kill_supervisor(run)
    assert _status(run).alive == "trainer"
    _cli(watch_dir, "pause")
    wait_for(lambda: _status(run).state == events.PAUSED, timeout=120)  # the hooked Trainer holds at a step
    held = len(_steps(run))
    time.sleep(1.5)
    assert len(_steps(run)) == held
    _cli(watch_dir, "stop")
    wait_for(lambda: kinds(run, "end"), timeout=300)
    (end,) = kinds(run, "end")
    assert end["state"] == events.STOPPED and end["exit_code"] == 0 and end["step"] >= 2
    assert any(line.startswith("saved the adapter") for e in kinds(run, "output") for line in e["lines"])  # type: ignore[attr-defined]
    wait_for(lambda: not watched_pids(run), timeout=60)
    viewer.kill()


def test_a_hooked_trainer_suspended_after_its_supervisor_died_is_resumed_by_a_new_one(
        model_dir: Path, watch_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    viewer = _start(watch_dir, *_seed(model_dir, tmp_path / "out", 40))
    run = _run(watch_dir)
    _wait_step(run, 2)
    _kill_supervisor(run)
    _cli(watch_dir, "pause")  # held at a step boundary, however fast this box trains
    wait_for(lambda: _status(run).state == events.PAUSED, timeout=120)
    _cli(watch_dir, "suspend")
    wait_for(lambda: _status(run).state == events.SUSPENDED and _status(run).alive == "", timeout=300)
    assert not kinds(run, "end") and kinds(run, "checkpoint")
    _cli(watch_dir, "resume")  # a new supervisor runs the command again, from its checkpoint
    wait_for(lambda: kinds(run, "end"), timeout=600)
    (end,) = kinds(run, "end")
    assert end["state"] == events.FINISHED and max(_steps(run)) == 40
    assert len(kinds(run, "train_begin")) == 2
    viewer.kill()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_the_keeper_leaves_as_its_command_did_even_when_sigkilled(sig: signal.Signals) -> None:
    """A cgroup OOM kill (Slurm's --mem) SIGKILLs the command: the keeper, re-raising it on itself, called
    signal.signal(SIGKILL, ...) and died on EINVAL, so the run's end was a keeper traceback, not the kill."""
    import subprocess

    code = f"from loratui.supervisor.keeper import exit_as; exit_as(-{int(sig)})"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == -int(sig), done.stderr
    assert "Traceback" not in done.stderr
