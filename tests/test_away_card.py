"""The "while you were away" card (issue 28): on attach, what happened since this user last looked."""

from __future__ import annotations

import time
from pathlib import Path

from loratui import events, userstate
from loratui.eventlog import EventWriter
from loratui.rundir import RunDir
from loratui.tui.app import live_app
from loratui.tui.screens import TextScreen


def _night(tmp_path: Path) -> tuple[RunDir, float]:
    """A recorded night: trained, looked at, then an OOM guard move, a NaN and the finish while away."""
    run = RunDir(tmp_path / "20270115-230000-night")
    run.path.mkdir()
    t0 = time.time() - 8 * 3600
    found = [
        events.Header(t=t0, schema=1, run_id=run.run_id, recipe_hash="h", name="night"),
        events.State(t=t0 + 1, state=events.TRAINING, step=0),
        events.Control(t=t0 + 60, command="pause", source="tui"),
        events.State(t=t0 + 61, state=events.PAUSED, reason="asked", step=100),
        events.State(t=t0 + 120, state=events.TRAINING, step=100),
        events.Step(t=t0 + 3600, step=1500, epoch=0.5, step_time=1.0),
        events.Notice(t=t0 + 3601, level="warning", key="guard", message="guard: OOM at step 1500 -> "
                      "gradient_checkpointing = true, restarted from checkpoint-1400"),
        events.Log(t=t0 + 4 * 3600, step=3000, values={"loss": "NaN"}),
        events.End(t=t0 + 7 * 3600, state=events.FINISHED, step=4000),
    ]
    writer = EventWriter(run.events)
    for event in found:
        writer.write(event)
    writer.close()
    return run, t0 + 200  # the user last looked after the pause and resume


async def _card(run: RunDir, pilot_size: tuple[int, int] = (100, 30)) -> str | None:
    """The card's text if the attach shows one, else None (once the whole history is folded)."""
    app = live_app(run, None, attached=True)
    async with app.run_test(size=pilot_size) as pilot:
        for _ in range(400):
            if isinstance(app.screen, TextScreen) or app.run_state.state == events.FINISHED:
                await pilot.pause(0.05)  # a pushed screen is current after the next message
                if isinstance(app.screen, TextScreen) or app.run_state.end is not None:
                    break
            await pilot.pause(0.05)
        if not isinstance(app.screen, TextScreen):
            return None
        body = str(app.screen.body)
        await pilot.press("escape")
        await pilot.pause(0.1)
        assert not isinstance(app.screen, TextScreen)  # dismissed with a key
        return body


async def test_attach_opens_on_what_happened_since_the_user_last_looked(tmp_path: Path) -> None:
    run, looked = _night(tmp_path)
    userstate.mark_viewed(run.path, looked)
    card = await _card(run)
    assert card is not None and card.startswith("While you were away")
    assert "guard: OOM at step 1500" in card and "step 3000" in card and "loss not finite" in card
    assert "ended finished" in card and "paused" not in card  # the pause was seen before
    assert f"loratui report {run.run_id} writes it down" in card  # said `loratui report RUN`: typed, RUN is no run
    assert userstate.last_viewed(run.path) == events_t(run)  # now seen up to the end
    assert await _card(run) is None  # nothing new since: no card the second time


async def test_a_run_never_viewed_opens_on_its_panes(tmp_path: Path) -> None:
    run, _ = _night(tmp_path)  # started headless, say: the panes show its whole history; no card over them
    assert await _card(run) is None
    assert userstate.last_viewed(run.path) is not None  # from now on it has been seen


def events_t(run: RunDir) -> float:
    from loratui.eventlog import read_log

    return read_log(run.events).events[-1].t


async def test_a_paused_run_that_writes_nothing_more_still_opens_on_its_card(tmp_path: Path) -> None:
    """The trial: detached from a CPU run, `loratui resume` then `loratui pause` from the shell, then attach: no
    card. A paused run with no GPU samples writes nothing more, and the card waited for an event newer than the
    attach; it now shows once the reader has read the whole log."""
    from loratui.rundir import write_pidfile

    run = RunDir(tmp_path / "20270115-230000-cpu")
    run.path.mkdir()
    t0 = time.time() - 600
    found = [
        events.Header(t=t0, schema=1, run_id=run.run_id, recipe_hash="h", name="cpu"),
        events.State(t=t0 + 1, state=events.TRAINING, step=0),
        events.Control(t=t0 + 60, command="pause", source="cli"),
        events.State(t=t0 + 61, state=events.PAUSED, step=4),
        events.Control(t=t0 + 120, command="resume", source="cli"),
        events.State(t=t0 + 121, state=events.TRAINING, step=4),
        events.Control(t=t0 + 300, command="pause", source="cli"),
        events.State(t=t0 + 301, state=events.PAUSED, step=20),
    ]
    writer = EventWriter(run.events)
    for event in found:
        writer.write(event)
    writer.close()
    write_pidfile(run.pidfile)  # its supervisor lives (this process stands in): the run is paused, not over
    userstate.mark_viewed(run.path, t0 + 61)  # detached while it was paused at step 4
    card = await _card(run)
    assert card is not None and card.startswith("While you were away"), card
    assert "resume asked from the shell" in card and "pause asked from the shell" in card, card
    assert card.count("paused") == 1 and "step 20" in card  # the pause at step 4 was seen before
