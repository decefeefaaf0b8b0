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
    assert texts == ["started night", "pause asked by agent", "paused (asked)", "resumed", "loss not finite",
                     "guard: learning rate halved", "ended finished"]
    assert [m.step for m in story.moments][-3:] == [12, 10, 20]
    assert [m.text for m in story.since(t0 + 4.5)] == texts[4:]
