"""`loratui report RUN` (issue 28): Markdown with PNG charts that open, and the story of the run in it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from loratui import events
from loratui.cli import main
from loratui.logic.story import Story

pytest.importorskip("matplotlib")


def test_the_report_of_the_tiny_demo_has_its_story_and_charts_that_open(healthy_tiny_run: Path,
                                                                          tmp_path: Path) -> None:
    import matplotlib.image

    out = tmp_path / "report"
    assert main(["report", str(healthy_tiny_run), "--out", str(out)]) == 0
    text = (out / "report.md").read_text()
    assert "## What happened" in text and "ended finished" in text and "started" in text
    assert "![loss](loss.png)" in text and "![throughput](throughput.png)" in text
    for name in ("loss.png", "throughput.png"):
        picture = matplotlib.image.imread(out / name)  # a real PNG, decoded
        assert picture.shape[0] > 100 and picture.shape[1] > 100
    # tiny runs on the CPU: no GPU samples, so the VRAM chart says why it is missing instead of a blank
    assert "![vram](vram.png)" in text or "vram: no data in this run" in text


def test_the_story_tells_a_night_in_order_with_who_asked() -> None:
    t0 = time.time()
    found = [
        events.Header(t=t0, schema=1, run_id="r1", recipe_hash="h", name="night"),
        events.State(t=t0 + 1, state=events.TRAINING, step=0),
        events.Step(t=t0 + 2, step=10, epoch=0.1, step_time=1.0),
        events.Control(t=t0 + 3, command="pause", source="agent"),
        events.State(t=t0 + 3, state=events.PAUSED, reason="asked", step=10),
        events.State(t=t0 + 4, state=events.TRAINING, step=10),
        events.Log(t=t0 + 5, step=12, values={"loss": "NaN"}),
        events.Log(t=t0 + 6, step=13, values={"loss": "NaN"}),
        events.Log(t=t0 + 7, step=14, values={"loss": 1.0}),
        events.Notice(t=t0 + 8, level="warning", key="guard", message="guard: learning rate halved"),
        events.End(t=t0 + 9, state=events.FINISHED, step=20),
    ]
    story = Story().feed_all(found)
    texts = [m.text for m in story.moments]
    assert texts == ["started night", "pause asked by an agent (loratui mcp)", "paused (asked)", "resumed",
                     "loss not finite",
                     "guard: learning rate halved", "ended finished"]
    assert [m.step for m in story.moments][-3:] == [12, 10, 20]
    assert [m.text for m in story.since(t0 + 4.5)] == texts[4:]


def test_a_hold_is_told_once_and_a_resume_after_a_suspend_is_told() -> None:
    """The report of a real tiny run (`P`, then `r`) said "suspended" twice, the trainer's word then the
    supervisor's with its reason, and never "resumed" (the run came back through starting and loading); a
    watched run saving while paused said "paused" twice. The events are those two runs' own."""
    t0 = time.time()
    found = [
        events.Header(t=t0, schema=1, run_id="r1", recipe_hash="h", name="tiny"),
        events.State(t=t0 + 1, state=events.TRAINING, step=0),
        events.Control(t=t0 + 2, command="pause", source="tui"),
        events.State(t=t0 + 3, state=events.PAUSED, step=13),
        events.Control(t=t0 + 4, command="save", source="tui"),
        events.State(t=t0 + 5, state=events.PAUSED, step=13),
        events.Control(t=t0 + 6, command="resume", source="tui"),
        events.State(t=t0 + 7, state=events.TRAINING, step=13),
        events.Control(t=t0 + 8, command="suspend", source="tui"),
        events.State(t=t0 + 9, state=events.SUSPENDED, step=195),
        events.State(t=t0 + 10, state=events.SUSPENDED,
                     reason="checkpoint written, memory freed; `loratui resume` continues"),
        events.Control(t=t0 + 11, command="resume", source="tui"),
        events.State(t=t0 + 12, state=events.STARTING, reason="resuming from checkpoint-195"),
        events.State(t=t0 + 13, state=events.LOADING, reason="loading model and data"),
        events.State(t=t0 + 14, state=events.TRAINING, step=195),
        events.End(t=t0 + 15, state=events.FINISHED, step=300),
    ]
    texts = [m.text for m in Story().feed_all(found).moments]
    assert texts == ["started tiny", "pause asked from the app", "paused", "save asked from the app",
                     "resume asked from the app",
                     "resumed", "suspend asked from the app",
                     "suspended (checkpoint written, memory freed; `loratui resume` continues)",
                     "resume asked from the app", "resumed", "ended finished"], texts
