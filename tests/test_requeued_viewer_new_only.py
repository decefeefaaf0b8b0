"""A requeued Slurm job's headless viewer prints the notices of its new life only (trial 11: each restart of the
job printed the earlier lives' notices and alerts again into the job's output, below the new start's lines;
`loratui report` tells the history, once)."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from loratui import cli, events
from loratui.eventlog import EventWriter
from loratui.rundir import RunDir
from tests.conftest import write_run

OLD = "the run will not finish before the time limit: it needs 9m52s more; Slurm ends job 213 in 9m42s"
NEW = "guard retry 1 of 2 (transient: the process was killed by signal 9 with no Python error)"


def test_the_next_life_prints_only_its_own_notices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capfd: pytest.CaptureFixture[str]) -> None:
    then = time.time() - 600  # the job's first life, ten minutes ago
    run = write_run(tmp_path / "runs" / "job213-130000-tiny", [
        events.Header(t=then, schema=1, run_id="job213-130000-tiny", recipe_hash="h", name="tiny",
                      slurm={"SLURM_JOB_ID": "213"}, node="n1"),
        events.Notice(t=then + 1, level="warning", key="time_limit", message=OLD),
        events.Notice(t=then + 1.1, level="error", key="alert", message="hung: no step for 10 minutes"),
        events.State(t=then + 2, state=events.SUSPENDED, step=40, reason="checkpoint saved before the time limit")])

    def adopted(found: RunDir, adopt: bool = False, stdin: int | None = None) -> int:
        assert adopt and found.path == run.path
        log = EventWriter(run.path / "events.jsonl")  # the new life's supervisor, as it writes
        now = time.time()
        for event in (events.State(t=now, state=events.STARTING, step=40),
                      events.Notice(t=now + 0.1, level="warning", key="guard_retry", message=NEW),
                      events.End(t=now + 0.2, state=events.FINISHED, step=50)):
            log.write(event)
        log.close()
        return 0

    monkeypatch.setattr("loratui.supervisor.launch.spawn_supervisor", adopted)
    assert cli._go_on(run, headless=True) == 0
    printed = capfd.readouterr().out
    assert f"notice: {NEW}" in printed, printed
    assert OLD not in printed and "hung: no step" not in printed, printed
    assert "run job213-130000-tiny: finished" in printed, printed


def test_follow_prints_to_the_stdout_of_its_call(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The full suite's flake (this file failed once in 4854 tests): `follow`'s `out` defaulted to sys.stdout as it
    was when loratui.tui.headless was first imported; imported under another test's captured stream, the progress
    and the end went there, and this run's viewer printed only `started`'s lines."""
    import importlib
    import io
    import sys

    from loratui.tui import headless

    current = sys.stdout
    sys.stdout = io.StringIO()  # the module imported while some other stream is sys.stdout
    try:
        importlib.reload(headless)
    finally:
        sys.stdout = current
    then = time.time() - 60
    run = write_run(tmp_path / "runs" / "r1", [
        events.Header(t=then, schema=1, run_id="r1", recipe_hash="h", name="tiny"),
        events.End(t=then + 1, state=events.FINISHED, step=5)])
    headless.follow(run, poll_s=0.01)
    assert "finished" in capsys.readouterr().out
