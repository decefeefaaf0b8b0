"""Issue 26 item 2: imported runs' times. A trainer_state.json logged every 10 steps replayed with a 10x
ETA (each Step's step_time was the time of 10 steps), and LLaMA-Factory's elapsed_time was ignored."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from loratui import events
from loratui.logic.runstate import RunState
from loratui.sources import importers


def _state_at(found: list[events.AnyEvent], step: int) -> RunState:
    state = RunState()
    for e in found:
        if isinstance(e, events.End) or (isinstance(e, events.Step) and e.step > step):
            break
        state.feed(e)
    return state


def _trainer_state(path: Path, runtime: float | None) -> Path:
    history = [{"loss": 2.0 - s / 100, "grad_norm": 1.0, "learning_rate": 2e-4, "epoch": s / 100, "step": s}
               for s in range(10, 101, 10)]
    if runtime is not None:
        history.append({"train_runtime": runtime, "train_loss": 1.5, "epoch": 1.0, "step": 100})
    path.write_text(json.dumps({"global_step": 100, "max_steps": 100, "log_history": history}))
    return path


def test_a_log_every_10_steps_gives_the_eta_of_the_run(tmp_path: Path) -> None:
    found = importers.import_path(_trainer_state(tmp_path / "trainer_state.json", runtime=360.0))  # a 6-min run
    state = _state_at(found, 50)
    assert state.step == 50 and state.seconds_per_step == pytest.approx(3.6)
    assert state.eta_s == pytest.approx(50 * 3.6)  # 3 min left, not 30


def test_without_a_summary_no_eta_is_made_up(tmp_path: Path) -> None:
    """It was 50 s here (1 s a step, not 10): a figure the record never held. With no time in the record, no
    ETA, pace or duration is given (test_importers: a real tiny run's checkpoint said "duration_s": 40.0)."""
    found = importers.import_path(_trainer_state(tmp_path / "trainer_state.json", runtime=None))
    state = _state_at(found, 50)
    assert state.step == 50 and state.eta_s is None and state.seconds_per_step is None


def test_llamafactory_elapsed_time_gives_the_times(tmp_path: Path) -> None:
    folder = tmp_path / "qwen-lora"
    folder.mkdir()
    log = folder / "trainer_log.jsonl"
    log.write_text("\n".join(  # 3.2 s a step, logged every 10 steps, stopped at step 50 of 100
        f'{{"current_steps": {s}, "total_steps": 100, "loss": {2.0 - s / 100}, "learning_rate": 1e-4, '
        f'"epoch": {s / 100}, "percentage": {s}, "elapsed_time": "0:{s * 32 // 600:02d}:{s * 32 // 10 % 60:02d}", '
        f'"remaining_time": "0:05:00"}}' for s in range(10, 51, 10)) + "\n")
    os.utime(log, (2_000_000_000, 2_000_000_000))
    found = importers.import_path(log)
    notice = next(e for e in found if isinstance(e, events.Notice))
    assert "elapsed_time" in notice.message and "1 s a step" not in notice.message
    steps = [e for e in found if isinstance(e, events.Step)]
    assert [e.step_time for e in steps] == pytest.approx([3.2] * 5)
    assert steps[-1].t == pytest.approx(2_000_000_000) and steps[0].t == pytest.approx(2_000_000_000 - 128)
    assert _state_at(found, 50).eta_s == pytest.approx(50 * 3.2)
