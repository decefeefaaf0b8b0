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


def test_the_phase_that_wrote_a_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A script that trains twice, suspended in its second train() at its step 4 (the run's 8), resumed; the resumed
    process ran its first train() again and was suspended again: the checkpoint it resumes from is its second
    phase's, at the run's step it was written, with the tokens seen then (not those of the steps trained again)."""
    monkeypatch.setattr(lives, "BLOCK", 256)
    log = tmp_path / "events.jsonl"
    writer = EventWriter(log)
    for life, last in ((1, 8), (2, 10)):
        writer.write(events.State(t=1.0, state=events.STARTING, reason=f"life {life}"))
        writer.write(events.TrainBegin(t=1.0, max_steps=4, num_epochs=1.0))
        _life(writer, range(1, 5), 0)  # the warm-up, trained again by each life
        writer.write(events.TrainBegin(t=1.0, max_steps=24, num_epochs=1.0, start_step=4 if life == 1 else 8))
        writer.write(events.TrainBegin(t=1.0, max_steps=0, num_epochs=0.0, pause_mode="signal"))  # read from output
        _life(writer, range(5 if life == 1 else 9, last + 1), 400 if life == 1 else 800)
        writer.write(events.Checkpoint(t=1.0, step=last, path=f"/o/main/checkpoint-{last - 4}"))
    writer.close()
    assert lives.resumed_phase(log, "/o/main/checkpoint-4") == lives.Resumed(phase=2, step=8, tokens_seen=800)
    assert lives.resumed_phase(log, "/o/main/../main/checkpoint-6") == lives.Resumed(phase=2, step=10,
                                                                                      tokens_seen=1000)
    assert lives.resumed_phase(log, "/o/warmup/checkpoint-4") is None
    assert lives.resumed_phase(tmp_path / "none.jsonl", "/o/main/checkpoint-4") is None
