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
