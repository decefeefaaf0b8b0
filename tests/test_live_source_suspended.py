"""The app attached to a run that is suspended with no supervisor left (saved before its Slurm job's limit and
requeued; `P`, then the supervisor gone) keeps following its log: trial 14's app stayed at "SUSPENDED step 1534"
while the requeued job's start trained the same run on to step 1900 (`ls` and a fresh attach showed it)."""

from __future__ import annotations

from pathlib import Path

from loratui import events
from loratui.eventlog import EventWriter
from loratui.rundir import RunDir
from loratui.sources.runlog import LiveSource


def _write(path: Path, *found: events.AnyEvent) -> None:
    log = EventWriter(path / "events.jsonl")
    for event in found:
        log.write(event)
    log.close()


def test_a_suspended_run_with_no_supervisor_is_followed_until_it_goes_on(tmp_path: Path) -> None:
    run = tmp_path / "20261206-005826-train"
    run.mkdir()
    _write(run, events.Header(t=1.0, schema=1, run_id=run.name, recipe_hash="h", name="train"),
           events.State(t=2.0, state=events.TRAINING, step=0),
           events.State(t=3.0, state=events.SUSPENDED, step=1534, reason="checkpoint saved before the time limit"))
    headless = LiveSource(RunDir(run))  # `loratui run --headless` in the job: its step must end there
    headless.poll()
    assert headless.poll().ended
    source = LiveSource(RunDir(run), follow_suspended=True)  # the app's
    assert len(source.poll().events) == 3
    quiet = source.poll()  # nobody writes now: no supervisor, no trainer
    assert not quiet.ended and quiet.events == [], quiet
    _write(run, events.State(t=9.0, state=events.STARTING, reason="Slurm job 131 restarted (restart 1)"),
           events.State(t=10.0, state=events.TRAINING, step=1534))
    went_on = source.poll()
    assert [e.state for e in went_on.events if isinstance(e, events.State)] == ["starting", "training"], went_on


def test_a_run_that_stopped_writing_while_training_is_still_ended(tmp_path: Path) -> None:
    run = tmp_path / "20261206-010000-lost"
    run.mkdir()
    _write(run, events.Header(t=1.0, schema=1, run_id=run.name, recipe_hash="h", name="lost"),
           events.State(t=2.0, state=events.TRAINING, step=3))
    source = LiveSource(RunDir(run))
    source.poll()
    assert source.poll().ended  # nobody will write again, and nothing waits to resume it
