"""A checkpoint whose trainer_state.json logs a NaN loss (Python's json writes `NaN`, which strict JSON refuses) is a
complete checkpoint: trial 16 suspended the README's NaN demo past its NaN and `resume` said "resuming from None",
training again from step 0."""

from __future__ import annotations

import json
import math
from pathlib import Path

from loratui import rundir


def _checkpoint(folder: Path, step: int, text: str) -> Path:
    path = folder / f"checkpoint-{step}"
    path.mkdir()
    (path / "trainer_state.json").write_text(text)
    return path


def test_a_nan_in_the_log_history_is_still_a_complete_checkpoint(tmp_path: Path) -> None:
    state = {"global_step": 17, "log_history": [{"loss": math.nan, "grad_norm": math.inf, "step": 10}]}
    text = json.dumps(state)  # as the Trainer writes it: bare NaN and Infinity
    assert "NaN" in text and "Infinity" in text
    _checkpoint(tmp_path, 10, '{"global_step": 10, "log_history": []}')
    newest = _checkpoint(tmp_path, 17, text)
    assert rundir.checkpoint_complete(newest)
    assert rundir.latest_checkpoint(tmp_path) == str(newest)


def test_a_cut_short_state_is_still_incomplete(tmp_path: Path) -> None:
    cut = _checkpoint(tmp_path, 20, '{"global_step": 20, "log_history": [{"loss": NaN, "st')
    assert not rundir.checkpoint_complete(cut) and rundir.latest_checkpoint(tmp_path) is None


def test_a_restart_with_advice_resumes_from_before_the_nan(tmp_path: Path) -> None:
    """`A`/`y`, `loratui apply --restart`, apply_advice: a checkpoint written after the NaN holds the weights that went
    NaN; the restart takes the newest one before it (the guard's rule), where a suspend's resume takes the newest."""
    from loratui.supervisor.restart import resume_point

    before = _checkpoint(tmp_path, 10, json.dumps({"global_step": 10, "log_history": [{"loss": 2.0, "step": 10}]}))
    _checkpoint(tmp_path, 20, json.dumps({"global_step": 20, "log_history": [{"loss": 2.0, "step": 10},
                                                                            {"loss": math.nan, "step": 20}]}))
    assert resume_point(tmp_path) == str(before)
    assert rundir.latest_checkpoint(tmp_path) == str(tmp_path / "checkpoint-20")
