"""A resumed trainer's tokens seen go on from the step it resumes from (`trainer/lives.py`); the real suspend and
resume are in test_run.py and test_watch_runs.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from loratui import events
from loratui.eventlog import EventWriter
from loratui.trainer import lives


def _life(writer: EventWriter, steps: range, base: int, rank: int = 0) -> None:
    for step in steps:
        writer.write(events.Step(t=float(step), step=step, epoch=0.0, step_time=1.0, tokens=100,
                                 tokens_seen=base + 100 * (step - steps.start + 1), rank=rank))
        writer.write(events.Output(t=float(step), stream="stdout", lines=["x" * 300]))


def test_the_count_at_the_step_resumed_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lives, "BLOCK", 256)  # lines cut across blocks
    log = tmp_path / "events.jsonl"
    writer = EventWriter(log)
    _life(writer, range(1, 21), 0)  # life 1: steps 1..20, 100 tokens each
    _life(writer, range(1, 21), 0, rank=1)
    _life(writer, range(11, 31), 1000)  # life 2 resumed from step 10: steps 11..30
    writer.close()
    assert lives.tokens_seen_at(log, 25) == 2500  # in the last life
    assert lives.tokens_seen_at(log, 10) == 1000  # a checkpoint older than the last life: the first life's
    assert lives.tokens_seen_at(log, 15, rank=1) == 1500
    assert lives.tokens_seen_at(log, 0) == 0 and lives.tokens_seen_at(tmp_path / "none.jsonl", 5) == 0
