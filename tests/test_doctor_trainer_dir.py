"""`loratui doctor` on what a Trainer leaves (its output_dir, a trainer_state.json) reads the log_history, as
`loratui import` does: a Trainer output directory was refused as "cannot read it (no events.jsonl in ...)", and a
trainer_state.json written on one line was "nothing to judge" beside a NaN loss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loratui.cli import main


def _state(path: Path, indent: int | None) -> None:
    history = [{"loss": 2.1 - 0.05 * i, "grad_norm": 0.9, "learning_rate": 1e-4, "epoch": i / 20, "step": 5 * i}
               for i in range(1, 8)]
    history.append({"loss": float("nan"), "grad_norm": float("nan"), "learning_rate": 1e-4, "epoch": 0.4,
                    "step": 40})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"log_history": history, "global_step": 40, "max_steps": 200}, indent=indent))


def test_a_trainer_output_dir_is_judged_by_its_newest_state(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _state(tmp_path / "out" / "checkpoint-40" / "trainer_state.json", indent=2)
    assert main(["doctor", str(tmp_path / "out"), "--json"]) == 1
    (item,) = json.loads(capsys.readouterr().out)
    assert item["id"] == "nan_loss" and item["step"] == 40


def test_a_one_line_trainer_state_is_no_empty_text(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _state(tmp_path / "trainer_state.json", indent=None)
    assert main(["doctor", str(tmp_path / "trainer_state.json")]) == 1
    out = capsys.readouterr().out
    assert "nan_loss  (step 40)" in out and "nothing to judge" not in out, out


def test_a_directory_with_neither_is_one_clear_message(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    assert main(["doctor", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no events.jsonl" in err and "trainer_state.json" in err and "Traceback" not in err, err


def test_other_json_is_still_read_as_text(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "config.json").write_text('{"hidden_size": 4096, "num_hidden_layers": 32}\n')
    assert main(["doctor", str(tmp_path / "config.json")]) == 0
    assert "no problems found" in capsys.readouterr().out
