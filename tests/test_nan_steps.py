"""Issue 24 item 6: transformers logs `'loss': 0` for a window of NaN steps (logging_nan_inf_filter), beside a
NaN grad_norm. Every reader of a loss takes that as a NaN step: the run state and the summary, `status.json`
(`ls`), the supervisor's alerts and the guard's verdict, and the advisor (no "collapsed to 0")."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from loratui import events, runstatus
from loratui.logic.advisor import Advisor
from loratui.recipe import load_recipe
from loratui.rundir import RunDir
from loratui.supervisor.watch import RunWatch
from tests.conftest import REPO, loratui, only_run
from tests.test_watch_runs import ENV, SCRIPTS, model_dir, watch_dir  # noqa: F401 (fixtures)

# What transformers 5.25 printed for tests/data/scripts/seed_trainer.py --nan-at 4 (a LoRA weight made NaN).
PRINTED = [(4, {"loss": 6.492, "grad_norm": 1.943, "learning_rate": 0.0001383, "epoch": 0.0625}),
           (5, {"loss": 0.0, "grad_norm": "NaN", "learning_rate": 0.0001, "epoch": 0.07812}),
           (6, {"loss": 0.0, "grad_norm": "NaN", "learning_rate": 6.173e-05, "epoch": 0.09375})]
LOGS = [events.Log(t=float(step), step=step, values=values)  # type: ignore[arg-type]
        for step, values in PRINTED]


def test_status_json_keeps_a_nan_step_nan() -> None:
    status = runstatus.fold(runstatus.Status(), LOGS)
    assert status.loss == "NaN"


def test_the_supervisors_alerts_see_a_nan_not_a_zero() -> None:
    watch = RunWatch("r", load_recipe(REPO / "recipes/tiny.toml"), write=lambda e: None)
    watch.feed(LOGS)
    assert watch.last_loss is not None and math.isnan(watch.last_loss)
    assert "loss 6.492 → nan" in watch._summary(6)
    assert [s for s, loss in watch.losses if not math.isnan(loss)] == [4]  # the guard's resume loss is real


def test_the_advisor_says_nan_not_collapsed_to_zero() -> None:
    items = Advisor(load_recipe(REPO / "recipes/tiny.toml")).feed_all(LOGS).items()
    assert [a.id for a in items] == ["nan_loss"], [a.title for a in items]


@pytest.mark.slow
def test_a_watched_trainer_going_nan(model_dir: Path, watch_dir: Path, tmp_path: Path) -> None:
    command = [sys.executable, str(SCRIPTS / "seed_trainer.py"), "--model", str(model_dir), "--out",
               str(tmp_path / "out"), "--max-steps", "8", "--nan-at", "4"]
    loratui("run", "--headless", "--runs-dir", str(watch_dir), "--", *command, timeout=900, env=ENV)
    run = only_run(watch_dir)
    summary = json.loads(loratui("replay", str(run), "--headless", "--summary").stdout)
    assert summary["last_loss"] == "NaN" and summary["nan_steps"] == [5, 6, 7, 8]
    assert summary["min_loss"] > 6.0 and summary["min_loss_step"] == 4, summary
    assert summary["diagnoses"] == ["nan_loss"], summary
    doctor = loratui("doctor", str(run)).stdout
    assert "collapsed" not in doctor and "fp16" not in doctor.split("optim =")[0], doctor
    assert runstatus.read(RunDir(run)).loss == "NaN"
    listed = loratui("ls", "--runs-dir", str(watch_dir)).stdout
    assert "NaN" in listed.splitlines()[-1] or "nan" in listed.splitlines()[-1].lower(), listed


def _pasted(text: str) -> list:
    import io

    from loratui.commands.doctor import diagnose_stream

    return diagnose_stream(io.BytesIO(text.encode()), "-")[0]


def test_a_nan_said_in_a_step_line_is_at_that_step() -> None:
    """A tmux trial: `step 3 loss nan` after two good steps was "loss became nan at step 1 ... non-finite from
    the first step": the line was read before the reader handed on its log."""
    items = _pasted("step 1 loss 2.5\nstep 2 loss 2.4\nstep 3 loss nan\nstep 4 loss nan\n")
    assert items[0].id == "nan_loss" and items[0].step == 3 and "first step" not in items[0].title, items[0]


def test_a_filtered_nan_at_the_start_that_the_run_recovers_from_is_the_loss_scaler() -> None:
    """fp16's loss scaler skips the first steps it overflows: the first log `'loss': 0.0` beside grad_norm nan,
    then normal training, is no NaN run (a tmux trial called it one); three such logs in a row still are."""
    good = "".join(f"{{'loss': {loss}, 'grad_norm': 1.0, 'learning_rate': 2e-05, 'epoch': 0.0{i + 2}}}\n"
                   for i, loss in enumerate((2.31, 2.2, 2.05, 1.9)))
    first = "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 0.0, 'epoch': 0.01}\n"
    assert not any(item.severity in ("error", "warning") for item in _pasted(first + good))
    assert _pasted(first * 3)[0].id == "nan_loss"
    assert _pasted(good + first)[0].id == "nan_loss"  # after training had scored: a NaN, not the scaler's start


def test_a_pasted_nan_with_no_step_claims_no_step() -> None:
    """A tmux trial: a paste with no step numbers ("after about 300 steps") was "loss became nan at step 0: not
    the learning rate (it is non-finite from the first step)". Step 0 there means unknown: no step is claimed."""
    items = _pasted("Loss went to nan after about 300 steps with fp16 on a V100 and I do not know why.\n")
    nan = [a for a in items if a.id == "nan_loss"]
    assert nan, [a.title for a in items]
    said = nan[0].title + " ".join(nan[0].evidence)
    assert "first step" not in said and "step 0" not in said, nan[0]


def test_a_nan_logged_at_step_one_is_from_the_first_step() -> None:
    """The counterpart: a NaN in the first log is from the first step, not the learning rate's doing."""
    items = _pasted("step 1 loss nan\nstep 2 loss nan\n")
    assert items[0].id == "nan_loss" and "from the first step" in items[0].title, items[0]
