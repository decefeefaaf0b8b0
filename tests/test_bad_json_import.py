"""Issue 26 item 5: a trainer_state.json that is not valid JSON says where (line, column), in import,
replay and doctor alike; it was read as a text log (imported, or 'no problems found') or got 'none of: ...'."""

from __future__ import annotations

from pathlib import Path

import pytest

from loratui.cli import main

BROKEN = '{\n  "global_step": 10,\n  "log_history": [\n    {"loss": 1.0, "step": 5},\n    {"loss": 0.9 "step": 10}\n  ]\n}\n'
CUT = '{\n  "global_step": 10,\n  "log_history": [\n    {"loss": 1.0, "step": 5},\n    {"loss": 0.9, "st'


@pytest.mark.parametrize("command", [["import"], ["replay", "--summary"], ["doctor"]])
@pytest.mark.parametrize(("text", "where"), [(BROKEN, "line 5 column 18"), (CUT, "line 5 column 19")])
def test_bad_json_says_where(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str], text: str,
                             where: str) -> None:
    state = tmp_path / "trainer_state.json"
    state.write_text(text)
    assert main([*command, str(state), "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert f"{state}: bad JSON at {where}" in err and "none of" not in err
    assert not (tmp_path / "runs").exists()  # nothing imported


def test_a_log_whose_lines_are_dicts_is_still_a_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "train.log"  # not named .json: a text log that opens with a printed dict
    log.write_text("{'loss': 1.0, 'grad_norm': 1.0, 'learning_rate': 2e-4,\n 'epoch': 0.1}\n"
                   "{'loss': 0.9, 'grad_norm': 1.0, 'learning_rate': 2e-4, 'epoch': 0.2}\n")
    assert main(["import", str(log), "--runs-dir", str(tmp_path / "runs")]) == 0


@pytest.mark.parametrize("text", ['{"loss": 1\n', '{"loss": 1.5, "step": 1\n\n{"loss": 1.4, "st\n'])
def test_a_log_of_broken_json_lines_only_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     text: str) -> None:
    """A tmux trial: a file whose only line is a broken `{"loss": 1` was imported (exit 0, a run of one step read
    from the broken line). No line of it is a record: one message naming the file and line, exit 2, no run."""
    log = tmp_path / "trainer_log.jsonl"
    log.write_text(text)
    assert main(["import", str(log), "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{log}:1:" in err and "JSON" in err and "fix" in err, err
    assert not (tmp_path / "runs").exists()


def test_a_json_log_cut_in_its_last_line_keeps_its_good_lines(tmp_path: Path) -> None:
    """The counterpart: a trainer_log.jsonl whose last line was cut by a kill is still imported."""
    log = tmp_path / "trainer_log.jsonl"
    log.write_text('{"current_steps": 1, "total_steps": 4, "loss": 2.0}\n'
                   '{"current_steps": 2, "total_steps": 4, "loss": 1.9}\n{"current_steps": 3, "total_st')
    assert main(["import", str(log), "--runs-dir", str(tmp_path / "runs")]) == 0


def test_a_broken_notebook_is_not_told_to_look_in_a_checkpoint(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """checkpoint-N/ holds trainer_state.json copies, never a notebook: that fix cannot apply to an .ipynb."""
    notebook = tmp_path / "finetune.ipynb"
    notebook.write_text('{"cells": [{"cell_type": "code", "outputs": [')
    assert main(["doctor", str(notebook)]) == 2
    err = capsys.readouterr().err
    assert "bad JSON at line 1" in err and "checkpoint-N" not in err and "notebook" in err, err
