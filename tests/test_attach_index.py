"""An attach to a long run opens from the run's saved index (events.idx, which the supervisor's indexer keeps
current), not by folding the whole log again on the app's event loop: a 200k-line log took 14 s there, the index's
fold 0.6 s (bench/adopt_long_log.py). What the app then shows is the same: the state, the advice, the away card."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from loratui import events, userstate
from loratui.eventlog import EventWriter
from loratui.logic.advisor import Advisor
from loratui.logic.runstate import RunState
from loratui.rundir import RunDir
from loratui.sources.logindex import IndexedLog
from loratui.tui.app import live_app
from loratui.tui.screens import TextScreen

STEPS = 3000


def _run(tmp_path: Path, indexed: bool) -> tuple[RunDir, float, list[events.AnyEvent]]:
    """A long night (STEPS logged steps, a NaN warning while away), indexed as its indexer leaves it, then a few
    more steps the index does not cover (written after its last save)."""
    run = RunDir(tmp_path / "20270115-230000-long")
    run.path.mkdir()
    t0 = time.time() - 8 * 3600
    found: list[events.AnyEvent] = [events.Header(t=t0, schema=1, run_id=run.run_id, recipe_hash="h", name="long"),
                                    events.State(t=t0 + 1, state=events.TRAINING, step=0),
                                    events.TrainBegin(t=t0 + 1, max_steps=STEPS + 100, num_epochs=1.0)]
    for step in range(1, STEPS + 1):
        t = t0 + 2 + step * 5.0
        found += [events.Step(t=t, step=step, epoch=step / STEPS, step_time=5.0),
                  events.Log(t=t, step=step, values={"loss": 3.0 - step / STEPS})]
        if step == STEPS - 10:
            found.append(events.Notice(t=t, level="warning", key="x", message="a warning while away"))
    writer = EventWriter(run.events)
    for event in found:
        writer.write(event)
    writer.close()
    if indexed:
        log = IndexedLog.of_file(run.events)
        assert log.update() and (run.path / "events.idx").exists()
    more = [e for step in range(STEPS + 1, STEPS + 6)
            for e in (events.Step(t=t0 + 2 + step * 5.0, step=step, epoch=1.0, step_time=5.0),
                      events.Log(t=t0 + 2 + step * 5.0, step=step, values={"loss": 2.0}))]
    writer = EventWriter(run.events)
    for event in more:
        writer.write(event)
    writer.close()
    return run, t0 + 2 + (STEPS - 100) * 5.0, found + more


async def _attach(run: RunDir, looked: float) -> tuple[RunState, list[str], str]:
    userstate.mark_viewed(run.path, looked)
    app = live_app(run, None, attached=True)
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(400):
            await pilot.pause(0.05)
            if app.run_state.step == STEPS + 5 and isinstance(app.screen, TextScreen):
                break
        card = str(app.screen.body) if isinstance(app.screen, TextScreen) else ""
        assert app.advisor is not None
        return app.run_state, [item.id for item in app.advisor.items()], card


@pytest.mark.parametrize("indexed", [True, False])
async def test_an_attach_reads_only_what_the_index_does_not_hold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 indexed: bool) -> None:
    run, looked, found = _run(tmp_path, indexed)
    fed = [0]
    feed = RunState.feed

    def counted(self: RunState, event: events.AnyEvent) -> None:
        fed[0] += 1
        feed(self, event)

    monkeypatch.setattr(RunState, "feed", counted)
    state, advice, card = await _attach(run, looked)
    monkeypatch.setattr(RunState, "feed", feed)
    whole, advisor = RunState().feed_all(found), Advisor(None)
    for event in found:
        advisor.feed(event)
    assert (state.step, state.loss[-3:], len(state.loss)) == (whole.step, whole.loss[-3:], len(whole.loss))
    assert advice == [item.id for item in advisor.items()]
    assert "a warning while away" in card, card
    # The history the index holds is not folded again (its 6,000 events were, one by one, on the event loop).
    assert fed[0] < 100 if indexed else fed[0] >= len(found), fed[0]
