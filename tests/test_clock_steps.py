"""Wall clock steps (issue 25 item 19): NTP or a resumed VM moves `time.time()` by an hour. Intervals are
timed on the monotonic clock, so +1 h raises no false "looks hung" alert, and -1 h neither makes a run's
duration negative nor hides a finished run's end (`ls` said `lost`). The step is injected by replacing
`time.time` (the monotonic clock is left alone, as a real step leaves it)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from loratui import events, runstatus
from loratui.eventlog import EventWriter
from loratui.logic.runstate import RunState
from loratui.logic.summary import summarize
from loratui.recipe import load_recipe
from loratui.supervisor.watch import RunWatch
from tests.conftest import TINY
from tests.test_alerts import _supervisor, _tiny_run

HOUR = 3600.0


def _steps(first: int, count: int, t0: float) -> list[events.AnyEvent]:
    return [events.Step(t=t0 + i, step=first + i, epoch=0.0, step_time=0.5) for i in range(count)]


def test_a_clock_stepped_forward_is_no_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[events.AnyEvent] = []
    watch = RunWatch("r", load_recipe(TINY), written.append)
    now = time.time()
    watch.feed([events.State(t=now, state=events.TRAINING), *_steps(1, 10, now - 10)])
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + HOUR)  # NTP: +1 h
    watch.tick()
    assert not [e for e in written if isinstance(e, events.Notice) and e.key == "hung"]
    # a real silence on the monotonic clock is still one
    watch.tick(time.monotonic() + watch.hang.min_s + 1)
    assert [e.key for e in written if isinstance(e, events.Notice)] == ["hung"]


def test_a_clock_stepped_back_never_makes_a_duration_negative() -> None:
    t0 = 1_800_000_000.0
    found = [events.Header(t=t0, schema=1, run_id="r", recipe_hash="x"),
             events.State(t=t0, state=events.TRAINING), *_steps(1, 30, t0 + 1),
             *_steps(31, 30, t0 + 31 - HOUR),  # the clock went back an hour after step 30
             events.End(t=t0 + 61 - HOUR, state=events.FINISHED, step=60)]
    state = RunState().feed_all(found)
    assert state.elapsed_s == pytest.approx(60.0, abs=1)
    assert summarize(state, "", [])["duration_s"] == pytest.approx(60.0, abs=1)
    written: list[events.AnyEvent] = []
    watch = RunWatch("r", load_recipe(TINY), written.append)
    watch.feed(found)
    assert "in 1m00s" in watch._summary(60), watch._summary(60)


def test_an_end_written_after_the_clock_went_back_is_seen_by_ls(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The supervisor folds the log into status.json, the clock steps back an hour, the supervisor dies;
    the orphaned trainer writes the run's end. `ls` (runstatus.read) must say finished, not lost."""
    run = _tiny_run(tmp_path)
    sup = _supervisor(run, monkeypatch)
    try:
        now = time.time()
        for event in [events.State(t=now, state=events.TRAINING), *_steps(1, 20, now)]:
            sup.log.write(event)
        sup._update_status()  # what its status thread does each second
        assert runstatus.read(run).step == 20
    finally:
        sup.unattended.close()
        sup.log.close()  # killed: it writes nothing more, and no pid file says it lives
    trainer = EventWriter(run.events)
    trainer.write(events.End(t=now + 25 - HOUR, state=events.FINISHED, step=20))
    trainer.close()
    status = runstatus.read(run)
    assert status.state == events.FINISHED and status.end is not None


def test_two_writers_events_out_of_order_by_milliseconds_add_nothing() -> None:
    """Supervisor and trainer stamp their events themselves: a sample may land after a step 2 ms newer.
    Summing forward gaps would count those milliseconds again and again; the duration stays the span."""
    t0 = 1_800_000_000.0
    found: list[events.AnyEvent] = [events.Header(t=t0, schema=1, run_id="r", recipe_hash="x")]
    for i in range(1, 1001):
        found += [events.Step(t=t0 + i, step=i, epoch=0.0, step_time=0.5),
                  events.Sample(t=t0 + i - 0.002, gpu=0, used_max=1, used_last=1, used_min=1, total=2)]
    assert RunState().feed_all(found).elapsed_s == pytest.approx(1000.0)
