"""A log of step-less dicts (`{'loss': 2.1, 'learning_rate': ...}` lines, as the Trainer prints them with
disable_tqdm): the steps come from what the log says (its logging_steps, the summary), else they are numbered in
line order and the import's message says those are no trainer's steps. Before, the k-th dict was step k whatever
the log printed, and `loratui import` said nothing of it (the note was only in the run's log)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loratui import cli, events
from loratui.logic.runstate import RunState
from loratui.sources import importers


def _dicts(n: int = 8) -> list[str]:
    return [f"{{'loss': {2.5 - 0.1 * i:.4f}, 'grad_norm': 0.5, 'learning_rate': {2e-4 * (1 - i / 10):.6f}, "
            f"'epoch': {i * 0.1:.2f}}}" for i in range(1, n + 1)]


def _state(path: Path) -> RunState:
    return RunState().feed_all(importers.import_path(path))


def test_printed_logging_steps_number_the_dicts(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_text("TrainingArguments(output_dir='out', logging_steps=10, per_device_train_batch_size=4)\n"
                    "***** Running training *****\n  Total optimization steps = 80\n" + "\n".join(_dicts()) + "\n")
    state = _state(path)
    assert [s for s, _ in state.loss] == [10, 20, 30, 40, 50, 60, 70, 80]
    assert state.max_steps == 80


def test_a_log_that_names_no_step_says_its_numbers_are_line_order(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "stepless.log"
    path.write_text("\n".join(_dicts()) + "\n")
    assert cli.main(["import", "--runs-dir", str(tmp_path / "runs"), str(path)]) == 0
    err = capsys.readouterr().err
    assert "note: " in err and "names no step" in err and "line order" in err and "not the trainer's steps" in err
    found = importers.import_path(path)
    notice = next(e for e in found if isinstance(e, events.Notice) and e.key == "import")
    assert "not the trainer's steps" in notice.message  # the app and replay show the same words


def test_a_trainer_state_import_prints_no_step_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "trainer_state.json"
    path.write_text('{"global_step": 2, "max_steps": 2, "log_history": [{"loss": 2.0, "step": 1}, '
                    '{"loss": 1.9, "step": 2}]}')
    assert cli.main(["import", "--runs-dir", str(tmp_path / "runs"), str(path)]) == 0
    assert "line order" not in capsys.readouterr().err
