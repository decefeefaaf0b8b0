"""Trial 12, a plain PyTorch loop watched with `loratui run -- python c_loop.py`: `x` asked "Stop the run at the
next step boundary?", and quitting with stop printed "stopping RUN at the next step boundary.", but such a
command has no step boundary loratui can stop at: the supervisor sends SIGTERM to its process group and it
ends at once (the loop stopped at step 193, mid-epoch, nothing saved). The agent's `stop` said the same
untrue thing. A recipe run and a hooked Trainer do stop at the next step boundary, and still say so."""

from __future__ import annotations

from pathlib import Path

from loratui import events, rundir
from loratui.commands import agent_view
from loratui.eventlog import EventWriter
from loratui.logic.runstate import RunState
from loratui.sources.runlog import ListSource
from loratui.tui.app import LoratuiApp, farewell
from tests import scenarios
from tests.test_app import FakeClock, Sent, _folded, _screen


def _starting_command() -> list[events.AnyEvent]:
    """A watched command before its Trainer began (or before its first printed step): stop is all it obeys."""
    return [events.Header(t=scenarios.T0, schema=1, run_id="20270115-093000-train", recipe_hash="abc123",
                          name="train", command=["python", "train.py"], controls=["stop"]),
            events.State(t=scenarios.T0, state=events.STARTING)]


def _hooked_command() -> list[events.AnyEvent]:
    """A watched command whose Trainer is hooked: its TrainBegin names the controls the command file gives."""
    found = scenarios.run(10)
    found[0] = _starting_command()[0]
    begin = next(i for i, e in enumerate(found) if isinstance(e, events.TrainBegin))
    found[begin] = events.TrainBegin(t=scenarios.T0 + 20, max_steps=200, num_epochs=1.0, device="cpu",
                                     controls=["pause", "resume", "save", "stop", "suspend"])
    return found


def test_which_runs_a_stop_reaches_by_signal() -> None:
    assert RunState().feed_all(scenarios.paused_by_signal(10)).stop_by_signal
    assert RunState().feed_all(_starting_command()).stop_by_signal
    assert not RunState().feed_all(_hooked_command()).stop_by_signal
    assert not RunState().feed_all(scenarios.run(10)).stop_by_signal  # a recipe run


async def _stop_question(found: list[events.AnyEvent]) -> str:
    sent = Sent()
    app = LoratuiApp(ListSource(found), send=sent, clock=FakeClock())
    async with app.run_test(size=(80, 24)) as pilot:
        await _folded(pilot, app)
        await pilot.press("x")
        for _ in range(100):
            if app.screen.__class__.__name__ == "Choice":
                break
            await pilot.pause(0.02)
        question = app.screen.question  # type: ignore[attr-defined]
        shown = " ".join(line.strip("█▀▄ ") for line in _screen(app))
        await pilot.press("n")
        await pilot.pause()
    assert sent == []
    assert "SIGTERM" in shown if "SIGTERM" in question else "step boundary" in shown  # it is on screen, at 80x24
    return str(question)


async def test_the_stop_question_says_sigterm_for_a_plain_loop_and_a_step_boundary_for_a_trainer() -> None:
    plain = scenarios.paused_by_signal(10)
    plain = plain[:next(i for i, e in enumerate(plain) if isinstance(e, events.Control))]  # training, not paused
    said = await _stop_question(plain)
    assert "SIGTERM" in said and "at once" in said and "next step boundary?" not in said, said
    said = await _stop_question(_hooked_command())
    assert said.startswith("Stop the run at the next step boundary?"), said
    said = await _stop_question(scenarios.run(10))
    assert said.startswith("Stop the run at the next step boundary?"), said


def test_the_farewell_after_a_stop_says_how_it_was_stopped(tmp_path: Path) -> None:
    run = rundir.RunDir(tmp_path / "20270115-093000-train")
    said = farewell(run, RunState().feed_all(scenarios.paused_by_signal(10)), "stop")
    assert "SIGTERM" in said and "step boundary" not in said, said
    said = farewell(run, RunState().feed_all(_hooked_command()), "stop")
    assert said == f"stopping {run.run_id} at the next step boundary.", said


def _run_of(tmp_path: Path, found: list[events.AnyEvent]) -> rundir.RunDir:
    settings = rundir.RunSettings(run_id="20270115-093000-train", name="train", recipe_source="")
    run = rundir.create(tmp_path / "runs", settings, rundir.IMPORTED_MARK + "\n")
    writer = EventWriter(run.events)
    for event in found:
        writer.write(event)
    return run


def test_the_agent_is_told_the_same(tmp_path: Path) -> None:
    assert "SIGTERM" in agent_view.stop_how(_run_of(tmp_path / "a", scenarios.paused_by_signal(10)))
    assert agent_view.stop_how(_run_of(tmp_path / "b", _hooked_command())) == "at its next step boundary"


def test_the_help_says_how_a_plain_loop_is_paused_and_stopped() -> None:
    from loratui.tui.screens import HELP

    said = " ".join(HELP.split())
    assert "paused by SIGSTOP" in said and "stopped by SIGTERM, both at once" in said
    assert max(len(line) for line in HELP.splitlines()) <= 60  # the page's width (test_app checks 80x24)
