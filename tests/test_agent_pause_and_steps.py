"""Trial 7, the agent interface: `run_status` on a run paused at a step boundary said `"reason": ""` (such a pause
records no reason), and doctor items carried `"step": 0` where the CLI shows no step, even when the advice's own
lines name one (`... at step 1200 when saving`)."""

from __future__ import annotations

from pathlib import Path

from loratui import events, rundir
from loratui.commands import agent_view
from loratui.eventlog import EventWriter
from loratui.logic.runstate import RunState
from tests import scenarios


def _run_of(tmp_path: Path, found: list[events.AnyEvent]) -> rundir.RunDir:
    settings = rundir.RunSettings(run_id="20270115-093000-tiny", name="tiny", recipe_source="")
    run = rundir.create(tmp_path / "runs", settings, rundir.IMPORTED_MARK + "\n")
    writer = EventWriter(run.events)
    for event in found:
        writer.write(event)
    return run


def test_run_status_says_a_run_is_paused_at_a_step_boundary_and_who_asked(tmp_path: Path) -> None:
    status = agent_view.status(_run_of(tmp_path, scenarios.paused(10)))
    assert status["reason"] == "paused at a step boundary after step 10, asked from the app (p)", status
    assert RunState().feed_all(scenarios.paused(10)).pause_note == ""  # the app's bar: PAUSED says it all there


def test_run_status_gives_a_signal_pause_its_note_and_who_asked(tmp_path: Path) -> None:
    from loratui.supervisor.command import PAUSE_REASON

    status = agent_view.status(_run_of(tmp_path, scenarios.paused_by_signal(10)))
    assert status["reason"] == f"{PAUSE_REASON}, asked from the app (p)", status


def test_an_agent_pause_and_a_resumed_run(tmp_path: Path) -> None:
    found = scenarios.run(10)
    t = found[-1].t
    found += [events.Control(t=t + 1, command="pause", source="agent"),
              events.State(t=t + 2, state=events.PAUSED, step=10)]
    paused = RunState().feed_all(found)
    assert paused.pause_why == "paused at a step boundary after step 10, asked by an agent (loratui mcp)"
    paused.feed(events.State(t=t + 3, state=events.TRAINING, reason="resumed"))
    assert paused.pause_why == ""


def test_doctor_items_carry_the_step_their_advice_names_or_none() -> None:
    found = agent_view.doctor("I get CUDA out of memory at step 1200 when saving the checkpoint")["items"]
    assert found[0]["id"] == "oom_at_save" and found[0]["step"] == 1200, found[0]
    found = agent_view.doctor("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")["items"]
    assert found[0]["id"] == "oom_full" and found[0]["step"] is None, found[0]
    found = agent_view.doctor("step 120 | loss: nan | lr: 2e-4")["items"]
    assert found[0]["id"] == "nan_loss" and found[0]["step"] == 120, found[0]  # its own step stands
