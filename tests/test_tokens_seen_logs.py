"""`include_num_input_tokens_seen=True` puts `train_runtime` and `train_tokens_per_second` in every step's log
(transformers' speed_metrics at each log): such a log is still a step's loss, not the end-of-training summary.
Before, every reader took `train_runtime` for the summary and a run of that Trainer had no loss at all
(`replay --summary` gave first_loss null, the headless line `loss --` to the end)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from loratui import events
from loratui.logic.advisor import Advisor
from loratui.logic.advisor.phase_bars import _trains
from loratui.logic.runstate import RunState
from loratui.logic.summary import summarize
from loratui.sources import importers
from loratui.supervisor.watch import RunWatch
from tests.test_advice import recipe, run

STEP = {"loss": 5.5375, "grad_norm": 0.146, "learning_rate": 0.004, "epoch": 0.2, "num_input_tokens_seen": 2560,
        "train_runtime": 1.1183, "train_tokens_per_second": 2289.178}
SUMMARY = {"train_runtime": 39.57, "train_samples_per_second": 30.3, "train_steps_per_second": 1.895,
           "total_flos": 2.4e10, "train_loss": 5.4059, "epoch": 3.0, "num_input_tokens_seen": 38400}


def _with_tokens(i: int, loss: float | str) -> events.Log:
    return events.Log(t=float(i), step=i, values={**STEP, "loss": loss, "epoch": i / 10})


def test_the_summary_is_told_from_a_step_log() -> None:
    assert events.is_train_summary(SUMMARY) and not events.is_train_summary(STEP)


def test_run_state_and_summary_keep_the_losses() -> None:
    found = [events.Header(t=0.0, schema=1, run_id="r", recipe_hash="h")]
    found += [_with_tokens(i, 6.0 - i / 10) for i in (5, 10, 15)]
    found.append(events.Log(t=16.0, step=15, values=SUMMARY))
    state = RunState().feed_all(found)
    assert state.loss == [(5, 5.5), (10, 5.0), (15, 4.5)]  # the summary's train_loss is no point
    summary = summarize(state, "")
    assert summary["first_loss"] == 5.5 and summary["last_loss"] == 4.5


def test_the_supervisor_watch_keeps_the_losses() -> None:
    watch = RunWatch("r", recipe(), write=lambda e: None)
    watch.feed([_with_tokens(i, 6.0 - i / 10) for i in (5, 10)] + [events.Log(t=11.0, step=10, values=SUMMARY)])
    assert list(watch.losses) == [(5, 5.5), (10, 5.0)] and watch.first_loss == 5.5


def test_a_nan_loss_in_such_a_log_is_a_nan_step_to_the_advisor() -> None:
    found = run(30, loss=lambda i: "NaN" if i >= 25 else 1.0)
    found = [events.Log(t=e.t, step=e.step, values={**STEP, **e.values}) if isinstance(e, events.Log) else e
             for e in found]
    assert "nan_loss" in {a.id for a in Advisor(recipe()).feed_all(found).items()}


def test_a_printed_step_dict_with_train_runtime_trains() -> None:
    assert _trains(str(STEP)) and not _trains(str(SUMMARY))


def test_trainer_state_with_tokens_seen_imports_its_losses(tmp_path: Path) -> None:
    history = [{**STEP, "step": s, "loss": 6.0 - s / 10} for s in (5, 10, 15)]
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"global_step": 15, "max_steps": 75, "log_history": history}))
    state = RunState().feed_all(importers.import_path(path))
    assert [s for s, _ in state.loss] == [5, 10, 15]
    assert state.state != events.FINISHED  # no summary: it stopped at 15 of 75, it did not finish
    assert not math.isnan(state.loss[-1][1])


@pytest.mark.parametrize("summary", [SUMMARY])
def test_the_summary_alone_still_finishes_an_import(tmp_path: Path, summary: dict) -> None:
    history = [{**STEP, "step": s, "loss": 6.0 - s / 10} for s in (5, 10, 15)] + [{**summary, "step": 15}]
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"global_step": 15, "max_steps": 15, "log_history": history}))
    state = RunState().feed_all(importers.import_path(path))
    assert state.state == events.FINISHED and [s for s, _ in state.loss] == [5, 10, 15]
