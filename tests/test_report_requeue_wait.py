"""The morning report of a run whose Slurm job was requeued at its time limit and waited in the queue (trial 14):
its duration counted the 3 hours in the queue as run time. The report tells the run time and the waiting apart;
`replay --summary` has the waiting as `waiting_s`."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from loratui import events
from loratui.cli import main
from loratui.eventlog import EventWriter
from loratui.logic.runstate import RunState

REQUEUED = ("checkpoint saved before the time limit; Slurm job 4242 requeued: its next start resumes this run "
            "from that checkpoint")
HOUR = 3600.0
T0 = 1000.0


def _run_dir(runs: Path, name: str) -> Path:
    """A run directory with the tiny recipe in it."""
    run = runs / name
    run.mkdir(parents=True)
    shutil.copy(Path(__file__).resolve().parent.parent / "loratui" / "recipes" / "tiny.toml", run / "recipe.toml")
    return run


def _night(runs: Path, stopped_while_waiting: bool = False) -> tuple[Path, list[events.AnyEvent]]:
    """An hour of training, suspended for the requeue, 3 hours in the queue, 30 minutes more training."""
    run = _run_dir(runs, "20261205-230000-qwen")
    found: list[events.AnyEvent] = [
        events.Header(t=T0, schema=1, run_id=run.name, recipe_hash="h", name="qwen"),
        events.State(t=T0, state=events.TRAINING, step=0),
        events.Log(t=T0 + HOUR - 60, step=100, values={"loss": 2.0}),
        events.State(t=T0 + HOUR, state=events.SUSPENDED, reason=REQUEUED, step=100)]
    if stopped_while_waiting:
        found += [events.End(t=T0 + 4 * HOUR, state=events.STOPPED, step=100)]
    else:
        found += [events.State(t=T0 + 4 * HOUR, state=events.STARTING, reason="Slurm job 4242 restarted (restart 1); "
                               "resuming from checkpoint-100"),
                  events.State(t=T0 + 4 * HOUR + 60, state=events.TRAINING, step=100),
                  events.Log(t=T0 + 4.5 * HOUR - 60, step=150, values={"loss": 1.5}),
                  events.End(t=T0 + 4.5 * HOUR, state=events.FINISHED, step=150)]
    log = EventWriter(run / "events.jsonl")
    for event in found:
        log.write(event)
    log.close()
    return run, found


def test_the_run_state_counts_the_queue_apart(tmp_path: Path) -> None:
    _, found = _night(tmp_path / "runs")
    state = RunState().feed_all(found[:4])
    assert state.waiting_s == 0.0  # suspended this very moment
    state.feed(events.Notice(t=T0 + 2 * HOUR, level="info", key="x", message="still waiting"))
    assert state.waiting_s == HOUR  # a suspension going on counts up to now
    state = RunState().feed_all(found)
    assert state.elapsed_s == 4.5 * HOUR and state.waiting_s == 3 * HOUR


@pytest.mark.parametrize("stopped", [False, True])
def test_the_report_tells_run_time_and_waiting_apart(tmp_path: Path, stopped: bool,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    run, _ = _night(tmp_path / "runs", stopped_while_waiting=stopped)
    assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    ran, wall = ("1h00m", "4h00m") if stopped else ("1h30m", "4h30m")
    assert f"| run time | {ran} |" in text, text
    assert "| waiting | 3h00m (suspended: a requeued job in Slurm's queue" in text, text
    assert f"| wall time | {wall} |" in text and "| duration |" not in text, text
    capsys.readouterr()
    assert main(["replay", str(run), "--summary"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["waiting_s"] == 3 * HOUR and summary["duration_s"] == (4 if stopped else 4.5) * HOUR


def test_a_run_never_suspended_keeps_one_duration(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    run, found = _night(tmp_path / "runs")
    kept = [e for e in found if not isinstance(e, events.State) or e.state == events.TRAINING]
    (run / "events.jsonl").unlink()
    log = EventWriter(run / "events.jsonl")
    for event in kept:
        log.write(event)
    log.close()
    assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    assert "| duration | 4h30m |" in text and "waiting" not in text, text


def _paused_run(runs: Path) -> Path:
    """20 minutes of training, paused (`p`) for an hour, 10 minutes more: a pause held until someone resumed it."""
    run = _run_dir(runs, "20261205-230000-paused")
    found: list[events.AnyEvent] = [
        events.Header(t=T0, schema=1, run_id=run.name, recipe_hash="h", name="paused"),
        events.State(t=T0, state=events.TRAINING, step=0),
        events.Log(t=T0 + 1200 - 30, step=100, values={"loss": 2.0}),
        events.State(t=T0 + 1200, state=events.PAUSED, reason="paused at step 100", step=100),
        events.Notice(t=T0 + 1800, level="info", key="x", message="still paused"),
        events.State(t=T0 + 1200 + HOUR, state=events.TRAINING, step=100),
        events.Log(t=T0 + 1800 + HOUR - 30, step=150, values={"loss": 1.5}),
        events.End(t=T0 + 1800 + HOUR, state=events.FINISHED, step=150)]
    log = EventWriter(run / "events.jsonl")
    for event in found:
        log.write(event)
    log.close()
    return run


def test_a_pause_is_told_apart_from_the_run_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A paused run's hour held at `p` counted as run time in `replay --summary`'s duration and the report (a suspend's
    wait was told apart): the pause is apart too, as `paused_s`, and `run_s` is the time it ran."""
    run = _paused_run(tmp_path / "runs")
    state = RunState().feed_all(list(_decoded(run))[:5])
    assert state.pausing_s == 600.0  # a pause going on counts up to now
    state = RunState().feed_all(list(_decoded(run)))
    assert state.elapsed_s == 1800 + HOUR and state.pausing_s == HOUR and state.run_s == 1800
    assert main(["replay", str(run), "--summary"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["duration_s"] == 1800 + HOUR and summary["paused_s"] == HOUR and summary["run_s"] == 1800
    assert summary["waiting_s"] == 0.0


def test_the_report_tells_a_pause_apart(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    run = _paused_run(tmp_path / "runs")
    assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    assert "| run time | 30m00s |" in text and "| paused | 1h00m (held until resumed) |" in text, text
    assert "| wall time | 1h30m |" in text and "| waiting |" not in text, text


def _decoded(run: Path) -> list[events.AnyEvent]:
    return [e for e in (events.decode_line(line) for line in (run / "events.jsonl").read_bytes().splitlines(True))
            if e is not None and not isinstance(e, events.Unknown)]
