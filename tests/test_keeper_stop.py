"""A stop asked of a watched run whose supervisor died, while a suspend is also on its way: the hooked Trainer
takes both at one step and leaves with the suspend's exit code (75). A live supervisor calls that run stopped
(owner.py: a stop asked and an exit in STOPPED_CODES); its keeper, standing in for the dead supervisor, called it
suspended and wrote no end, so the run waited for a `loratui resume` its user had said no to."""

from __future__ import annotations

from pathlib import Path

import pytest

from loratui import events, rundir
from tests.conftest import kinds, wait_for, watched_pids
from tests.test_watch_orphan import _cli, _kill_supervisor, _status
from tests.test_watch_runs import _run, _seed, _start, _wait_step, model_dir, watch_dir  # noqa: F401 - fixtures

pytestmark = pytest.mark.slow


def test_suspend_and_stop_together_after_the_supervisor_died_end_the_run_stopped(
        model_dir: Path, watch_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    viewer = _start(watch_dir, *_seed(model_dir, tmp_path / "out", 3000))
    run = _run(watch_dir)
    _wait_step(run, 2)
    _kill_supervisor(run)
    _cli(watch_dir, "pause")  # held at a step boundary, so both commands reach the same one
    wait_for(lambda: _status(run).state == events.PAUSED, timeout=120)
    with open(rundir.RunDir(run).commands, "a", encoding="utf-8") as commands:
        commands.write("suspend\nstop\n")  # what `loratui suspend; loratui stop` append with no supervisor
    wait_for(lambda: kinds(run, "exit"), timeout=300)
    (exited,) = kinds(run, "exit")
    assert exited["exit_code"] == rundir.SUSPEND_EXIT, exited
    try:
        wait_for(lambda: kinds(run, "end"), timeout=60)
    except AssertionError:
        raise AssertionError(f"no end after {exited}: {kinds(run, 'state')[-3:]}") from None
    (end,) = kinds(run, "end")
    assert end["state"] == events.STOPPED and exited["state"] == events.STOPPED, (end, exited)
    assert _status(run).state == events.STOPPED
    wait_for(lambda: not watched_pids(run), timeout=60)
    viewer.kill()
