"""A plain loop paused by SIGSTOP keeps its GPU memory: the status line says so beside PAUSED, folded from the
log's state event, so the live app, `attach` and `replay` all show it (issue 17)."""

from __future__ import annotations

from pathlib import Path

from loratui import events
from loratui.eventlog import EventWriter
from loratui.logic.runstate import RunState
from loratui.rundir import RunDir
from loratui.sources.runlog import ListSource
from loratui.supervisor.command import PAUSE_NOTE, PAUSE_REASON
from loratui.tui.app import LoratuiApp, live_app
from loratui.tui.widgets.status import StatusBar
from tests import scenarios

SEEN = "paused by SIGSTOP: GPU memory stays held; multi-process peers may time out"


def test_the_reason_is_folded_from_the_log_and_leaves_with_the_pause() -> None:
    state = RunState().feed_all(scenarios.paused_by_signal(10))
    assert state.state == events.PAUSED and state.pause_note == PAUSE_REASON == SEEN
    state.feed(events.State(t=state.last_t or 0.0, state=events.TRAINING, reason="resumed"))
    assert state.pause_note == ""
    assert RunState().feed_all(scenarios.paused(10)).pause_note == ""  # a pause at a step boundary says nothing


def test_a_held_run_has_no_eta() -> None:
    """Paused or suspended, a run ends when someone resumes it: no ETA until then, and one again after."""
    state = RunState().feed_all(scenarios.paused(10))
    assert state.state == events.PAUSED and state.seconds_per_step and state.eta_s is None
    state.feed(events.State(t=state.last_t or 0.0, state=events.SUSPENDED))
    assert state.eta_s is None
    state.feed(events.State(t=state.last_t or 0.0, state=events.TRAINING, reason="resumed"))
    assert state.eta_s is not None and state.eta_s > 0


async def _shows(app: LoratuiApp, text: str, size: tuple[int, int] = (80, 24), keys: tuple[str, ...] = ()) -> str:
    """The status bar's text once it shows `text` (or after a bounded wait: the assertion says what it was)."""
    async with app.run_test(size=size) as pilot:
        for key in keys:
            await pilot.press(key)
        bar = app.query_one(StatusBar)
        noted, height = text == SEEN, 3 if text == SEEN else 2
        for _ in range(200):  # the text first, the class and the height at the next layout pass
            await pilot.pause(0.05)
            if text in bar.text and bar.has_class("-noted") == noted and bar.region.height == height:
                break
        assert bar.has_class("-noted") == (text == SEEN) and bar.region.height == (3 if text == SEEN else 2)
        return bar.text


async def test_live_app_shows_why_beside_paused() -> None:
    app = LoratuiApp(ListSource(scenarios.paused_by_signal(20)), None, send=lambda command: None)
    shown = await _shows(app, SEEN)
    assert "PAUSED" in shown and SEEN in shown.splitlines()[2]  # the whole reason fits 80 columns


async def test_a_step_boundary_pause_keeps_two_lines() -> None:
    app = LoratuiApp(ListSource(scenarios.paused(20)), None, send=lambda command: None)
    shown = await _shows(app, "PAUSED")
    assert len(shown.splitlines()) == 2


def _recorded(tmp_path: Path) -> RunDir:
    run = RunDir(tmp_path / "20270115-093000-train")
    run.path.mkdir()
    writer = EventWriter(run.events)
    for event in scenarios.paused_by_signal(20):
        writer.write(event)
    writer.close()
    return run


async def test_attach_shows_it_from_the_log(tmp_path: Path) -> None:
    shown = await _shows(live_app(_recorded(tmp_path), None), SEEN)  # `loratui attach`: no viewer memory
    assert "PAUSED" in shown


async def test_replay_shows_it_at_the_end(tmp_path: Path) -> None:
    from loratui.commands.replay import _open
    from loratui.tui.replay_app import replay_app

    run = _recorded(tmp_path)
    opened = _open(str(run.path), tmp_path)  # as `loratui replay RUN` opens it: the indexed file
    app = replay_app(opened.log, opened.recipe, opened.title, speed=1)
    shown = await _shows(app, SEEN, keys=("G",))
    assert "PAUSED" in shown


def test_a_cpu_run_holds_its_memory_not_a_gpus() -> None:
    """A tmux trial: a SIGSTOP pause on a CPU box said "GPU memory stays held". Each says what the machine holds,
    and the status line's reason fits 80 columns."""
    from loratui.supervisor.command import pause_words

    cpu, gpu = pause_words(False), pause_words(True)
    assert all("GPU" not in text and "memory stays held" in text for text in cpu), cpu
    assert gpu == (PAUSE_REASON, PAUSE_NOTE) and all("GPU memory stays held" in text for text in gpu)
    assert max(len(cpu[0]), len(gpu[0])) <= 80


def test_the_keeper_reads_the_machine_from_the_runs_header(tmp_path: Path) -> None:
    """The keeper pauses for a dead supervisor, whose GPU probe is gone: the header it wrote says what was found."""
    from loratui.supervisor.command import header_has_gpu

    run = RunDir(tmp_path / "20270115-093000-train")
    run.path.mkdir()
    assert not header_has_gpu(run)  # no log yet
    for totals, expected in (([], False), ([80 << 30], True)):
        run.events.write_bytes(events.encode(events.Header(t=1.0, schema=1, run_id="r", recipe_hash="h",
                                                           gpu_totals=totals)))
        assert header_has_gpu(run) is expected
