"""A run whose total steps was never known (a watched loop printing no total): finished, its bar is full and
says how many steps it took, in the app's status bar and the headless line alike; still running, or ended
otherwise, its total stays unknown ("?")."""

from __future__ import annotations

import re
from pathlib import Path

from loratui import events
from loratui.eventlog import EventWriter
from loratui.logic.runstate import RunState
from loratui.sources.runlog import ListSource
from loratui.tui.app import LoratuiApp
from loratui.tui.headless import progress_line
from loratui.tui.widgets.status import StatusBar
from tests import scenarios
from tests.conftest import loratui


def _no_total(end: str | None) -> list[events.AnyEvent]:
    found = [events.TrainBegin(t=e.t, max_steps=0, num_epochs=0.0) if isinstance(e, events.TrainBegin) else e
             for e in scenarios.run(12)]
    return found + ([events.End(t=found[-1].t + 1, state=end, exit_code=0)] if end else [])


def test_a_finished_run_with_no_known_total_has_a_full_bar_and_its_step_count() -> None:
    state = RunState().feed_all(_no_total(events.FINISHED))
    assert state.max_steps == 0 and state.total_steps == 12
    assert "[########################] step 12/12 " in progress_line(state)


def test_an_unfinished_or_stopped_run_keeps_its_total_unknown() -> None:
    for end in (None, events.STOPPED, events.FAILED):
        line = progress_line(RunState().feed_all(_no_total(end)))
        assert "[------------------------] step 12/? " in line, (end, line)


async def test_the_status_bar_of_a_finished_run_with_no_known_total_is_full() -> None:
    app = LoratuiApp(ListSource(_no_total(events.FINISHED)), None)
    async with app.run_test(size=(120, 24)) as pilot:
        bar = app.query_one(StatusBar)
        for _ in range(200):
            await pilot.pause(0.05)
            if "FINISHED" in bar.text:
                break
        step_line = bar.text.splitlines()[1]
        assert " step 12/12 " in step_line and "█" in step_line and "·" not in step_line, step_line


def test_ls_gives_a_finished_run_with_no_known_total_its_step_count(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for name, end in (("a-finished", events.FINISHED), ("b-stopped", events.STOPPED)):
        (runs / name).mkdir(parents=True)
        log = EventWriter(runs / name / "events.jsonl")
        for event in _no_total(end):
            log.write(event)
        log.close()
    listed = loratui("ls", "--runs-dir", str(runs)).stdout
    assert re.search(r"a-finished +finished +12/12 ", listed) and re.search(r"b-stopped +stopped +12/\? ", listed), \
        listed


def test_ls_says_a_finished_run_that_took_no_steps_took_0_steps(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "empty"
    run.mkdir(parents=True)
    log = EventWriter(run / "events.jsonl")
    begun = [e for e in _no_total(None) if not isinstance(e, (events.Step, events.Log, events.Sample))]
    for event in [*begun, events.End(t=begun[-1].t + 1, state=events.FINISHED, exit_code=0)]:
        log.write(event)
    log.close()
    listed = loratui("ls", "--runs-dir", str(tmp_path / "runs")).stdout
    assert re.search(r"empty +finished +0 steps ", listed) and "0/0" not in listed, listed
