"""Replay in the app: a real tiny run played back at x1000 ends in the state and advice live showed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loratui.eventlog import read_log
from loratui.logic.advisor import Advisor
from loratui.logic.runstate import RunState
from loratui.recipe import load_recipe
from loratui.tui.replay_app import replay_app
from tests import scenarios
from tests.conftest import TINY, loratui, only_run


def _fingerprint(state: RunState) -> tuple[object, ...]:
    return (state.state, state.step, state.max_steps, state.loss, state.nan_steps, state.checkpoints,
            state.device_used_peak, state.peak_reserved)


async def _play_to_end(app, pilot) -> None:  # type: ignore[no-untyped-def]
    for _ in range(600):
        await pilot.pause(0.05)
        if app.replay.done:
            break
    await pilot.pause(0.5)


@pytest.mark.slow
async def test_replay_at_x1000_ends_where_live_ended(runs_dir: Path) -> None:
    result = loratui("run", str(TINY), "--headless", "--max-steps", "25", "--runs-dir", str(runs_dir))
    assert result.returncode == 0, result.stderr
    run = only_run(runs_dir)
    found = read_log(run / "events.jsonl").events
    recipe = load_recipe(run / "recipe.toml")
    live = RunState().feed_all(found)  # what the live viewer folded, event by event
    live_advice = Advisor(recipe).feed_all(found).items()
    app = replay_app(found, recipe, "tiny", speed=1000)
    async with app.run_test(size=(120, 40)) as pilot:
        await _play_to_end(app, pilot)
        assert _fingerprint(app.run_state) == _fingerprint(live)
        assert app.advisor.items() == live_advice


async def _until(pilot: Any, done: Callable[[], bool], polls: int = 400) -> None:
    """Let the app run until `done()` (a seek's worker posted and its handler ran), within 20 s."""
    for _ in range(polls):
        await pilot.pause(0.05)
        if done():
            return


async def test_seek_keys_rebuild_state_and_advice() -> None:
    found = scenarios.nan_run()
    app = replay_app(found, None, "nan", speed=1)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("space")  # paused: a seek's result stays put while it is checked
        await pilot.press("G")  # to the end
        await _until(pilot, lambda: app.run_state.step == 50)
        assert app.run_state.step == 50 and [a.id for a in app.advisor.items()][:1] == ["nan_loss"]
        await pilot.press("g")  # back to the start: nothing seen yet, no advice
        await _until(pilot, lambda: app.run_state.step == 0)
        assert app.run_state.step == 0 and app.advisor.items() == []
        await pilot.press("right_square_bracket")  # the next event of note: the first NaN
        await _until(pilot, lambda: app.run_state.step == 35)
        assert app.run_state.nan_steps[:1] == [35] and app.run_state.step == 35
        await pilot.press("left")
        await _until(pilot, lambda: app.run_state.step == 34)
        assert app.run_state.step == 34 and not app.run_state.nan_steps


async def test_compare_overlays_the_second_run() -> None:
    other = RunState().feed_all(scenarios.run(60, peak_gib=33.5, seed=3))
    app = replay_app(scenarios.run(60), None, "a", speed=1000, compare=other)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("G")
        await _until(pilot, lambda: app.run_state.step == 60)
        await pilot.pause(0.3)
        from loratui.tui.widgets.loss_plot import LossPlot
        from loratui.tui.widgets.vram import VramPane

        assert app.query_one(LossPlot).compare is other and app.query_one(VramPane).compare is other
        rendered = str(app.query_one(VramPane).render())
        assert rendered.count("30 GiB") == 2  # one warning line per run


async def test_from_step_opens_at_that_step() -> None:
    app = replay_app(scenarios.run(60), None, "from", speed=1, start_step=30)
    async with app.run_test(size=(120, 40)) as pilot:
        await _until(pilot, lambda: app.run_state.step >= 30)
        assert 30 <= app.run_state.step <= 31  # x1 playing on from 30: at most one more 2.7 s step


async def test_help_lists_the_replay_keys_only() -> None:
    from textual.widgets import Static

    from loratui.tui.screens import TextScreen

    app = replay_app(scenarios.run(10), None, "help", speed=1)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause(0.2)
        assert isinstance(app.screen, TextScreen)
        text = " ".join(str(w.render()) for w in app.screen.query(Static))
        assert "play / pause" in text and "next / previous event of note" in text
        for live_only in ("suspend", "detach", "save a checkpoint", "apply the highlighted advice"):
            assert live_only not in text


async def test_g_goes_to_the_start_of_training_not_an_empty_starting_state() -> None:
    app = replay_app(scenarios.run(30), None, "g", speed=1)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("G")
        await _until(pilot, lambda: app.run_state.step == 30)
        await pilot.press("g")
        await _until(pilot, lambda: app.run_state.step == 0)
        assert app.run_state.step == 0 and app.run_state.state == "training" and app.run_state.max_steps == 200


async def test_a_slow_seek_that_finishes_after_a_later_one_is_dropped() -> None:
    """`G` folding a long way while the user presses `g`: the later key wins, whichever worker ends last."""
    import threading

    app = replay_app(scenarios.run(30), None, "slow", speed=1)
    release, real = threading.Event(), app.replay.fold_at

    def fold_at(index: int) -> Any:
        if index == app.replay.n_events:  # the end: held until `g` has landed
            release.wait(20)
        return real(index)

    app.replay.fold_at = fold_at  # type: ignore[method-assign]
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("space", "G", "g")
        await _until(pilot, lambda: app.run_state.step == 0 and app.run_state.state == "training")
        release.set()  # G's fold ends now, after g's
        await pilot.pause(0.5)
        assert app.run_state.step == 0 and app.replay.cursor < app.replay.n_events


async def test_the_next_event_of_note_says_what_it_is() -> None:
    """`]` on a run that saved at step 30: one stop, at the checkpoint, and it says so (it jumped in silence)."""
    app = replay_app(scenarios.with_save(), None, "save", speed=1)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.press("space")
        await pilot.press("right_square_bracket")
        await _until(pilot, lambda: app.run_state.step == 30)
        await pilot.pause()
        assert app.run_state.step == 30
        assert [n.message for n in app._notifications] == ["checkpoint saved at step 30"]


async def test_the_next_event_of_note_counts_from_a_seek_still_on_its_way() -> None:
    """`g` then `]` typed at once (the seek folds in a worker): `]` went from the old cursor, the end, and found
    nothing; it goes from the start, to the first NaN."""
    app = replay_app(scenarios.nan_run(), None, "nan", speed=1)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.press("space")
        await pilot.press("G")
        await _until(pilot, lambda: app.run_state.step == 50)
        app.action_jump_start()  # both before the event loop can apply the first seek's result
        app.action_note(1)
        await _until(pilot, lambda: app.run_state.step == 35)
        assert app.run_state.step == 35 and app.run_state.nan_steps[:1] == [35]


async def test_a_step_key_pressed_again_counts_from_the_step_still_on_its_way() -> None:
    """`←` twice at once (a held key: the first seek still folds in a worker) went back one step, not two: the
    second counted from the old cursor."""
    app = replay_app(scenarios.nan_run(), None, "nan", speed=1)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.press("space")
        await pilot.press("G")
        await _until(pilot, lambda: app.run_state.step == 50)
        app.action_step(-1)  # both before the event loop can apply the first seek's result
        app.action_step(-1)
        await _until(pilot, lambda: app.run_state.step == 48)
        assert app.run_state.step == 48


async def test_a_record_without_times_is_placed_by_steps_not_drawn_seconds() -> None:
    """A trainer_state.json import with no times of its own (its steps drawn a second apart): the position said
    `40s/40s`, seconds nobody measured; it says the step and that the record holds no times."""
    from loratui.sources import importers
    from loratui.tui.widgets.status import StatusBar

    found = importers.import_path(Path(__file__).parent / "data" / "trainer_state" / "v4_45_checkpoint.json")
    app = replay_app(found, None, "imported", speed=1000)
    async with app.run_test(size=(120, 40)) as pilot:
        await _play_to_end(app, pilot)
        bar = str(app.query_one(StatusBar).render())
        assert "REPLAY" in bar and f"step {app.run_state.step}/{app.run_state.total_steps}" in bar, bar
        assert "no times" in bar and "40s" not in bar, bar
    timed = replay_app(importers.import_path(Path(__file__).parent / "data" / "trainer_state" / "v5_final.json"),
                       None, "timed", speed=1000)
    async with timed.run_test(size=(120, 40)) as pilot:
        await _play_to_end(timed, pilot)
        assert "12s/12s" in str(timed.query_one(StatusBar).render())  # its train_runtime: measured, shown
