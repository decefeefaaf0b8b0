"""Issue 24 item 3: a plain loop's printed losses, in each framework's spelling, are recorded as printed.

A real script (tests/data/scripts/printed_losses.py) runs under `loratui run --headless --`; it writes the
losses it printed to a file, and every loss loratui recorded must be one of them (at the step the script
printed it on, where the line names its step). The losses start above the step numbers, so a step read as
the loss (`step 5 loss 22.4671` -> 5.0) cannot pass.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from loratui import events
from loratui.logic.text_reader import TextReader
from tests.conftest import kinds, loratui
from tests.test_watch_runs import SCRIPTS, _losses, _run, _start, watch_dir  # noqa: F401 (a fixture)

STEPS = 12
NAMED_STEP = ("plain", "colon", "pipe", "slash")
"""Forms whose line names its step (Keras's `5/12 [===...]` counts batches of an epoch and starts again
each epoch, so its lines are numbered in order; a bar's postfix shows the step before its counter)."""


@pytest.mark.parametrize(("line", "step", "loss"), [
    ("step 5 loss 22.4671", 5, 22.4671),
    ("step 5: loss 22.4671", 5, 22.4671),
    ("step 5 | loss 22.4671", 5, 22.4671),
    ("Step 5/40 | loss 22.4671 | lr 0.02", 5, 22.4671),
    ("5/40 [===>        ] - 0s 2ms/step - loss: 22.4671", 1, 22.4671),  # numbered in order
    # Keras 3 in a file: one line an epoch, its bar drawn with box characters; val_loss is not the loss.
    ("100/100 ━━━━━━━━━━━━━━━━━━━━ 0s 2ms/step - accuracy: 0.95 - loss: 22.4671 - val_loss: 30.0", 1, 22.4671),
    # detectron2's event writer: `iter` is its step, `total_loss` its loss (the heads' losses follow)
    (("[03/02 10:21:07 d2.utils.events]:  eta: 2:01:13  iter: 19  total_loss: 22.4671  loss_cls: 0.7  "
      "loss_box_reg: 0.5  time: 0.51  data_time: 0.01  lr: 0.0002  max_mem: 3012M"), 19, 22.4671),
    ("iter 300: loss 22.4671, time 212.40ms, mfu 31.20%", 300, 22.4671),  # nanoGPT
    ("INFO:tensorflow:loss = 22.4671, step = 1200 (10.213 sec)", 1200, 22.4671),  # TF Estimator's `step = N`
    ("Iteration 40 | Total Loss: 22.4671 | lr 1e-4", 40, 22.4671),
    ("[train] Iter: 7/900, loss=22.4671", 7, 22.4671),
    ("训练第 3 轮，损失：22.4671", 1, 22.4671),  # a Chinese log: 损失 is the loss (numbered in order)
    ("step: 12, 损失值: 22.4671, 学习率: 0.001", 12, 22.4671),
    # OpenNMT-py: its loss is the cross-entropy it calls xent
    ("[2023-01-01 10:00:00,000 INFO] Step 100/10000; acc:  10.50; ppl: 1000.20; xent: 22.4671; lr: 0.00100;", 100,
     22.4671),
    ("{'train_loss': 22.4671, 'val_loss': 30.1, 'epoch': 1}", 1, 22.4671),  # a hand-written loop's epoch dict
])
def test_each_spelling_of_a_step_and_its_loss(line: str, step: int, loss: float) -> None:
    reader = TextReader()
    found = [e for e in reader.feed(line) + reader.close() if isinstance(e, events.Log)]
    assert [(e.step, e.values["loss"]) for e in found] == [(step, loss)]


@pytest.mark.parametrize("line", [
    "max_iter: 90000, base_lr: 0.02",  # a setting named after the step, no loss
    "Iteration 40 finished",
    "the loss function is 交叉熵损失",
    "loss_scale: 1024, iter 30",  # the loss scale is no loss
])
def test_no_loss_where_a_line_prints_none(line: str) -> None:
    reader = TextReader()
    assert [e for e in reader.feed(line) + reader.close() if isinstance(e, events.Log)] == []


def test_the_trainers_summary_keeps_its_train_loss() -> None:
    """The end-of-training summary's train_loss is the run's mean, not a step's loss: only a hand-written loop's
    epoch dict (no runtime beside it) has its train_loss read as the loss."""
    reader = TextReader()
    line = "{'train_runtime': 812.3, 'train_samples_per_second': 9.8, 'train_loss': 22.4671, 'epoch': 3.0}"
    found = [e for e in reader.feed(line) + reader.close() if isinstance(e, events.Log)]
    assert [sorted(e.values) for e in found] == [["epoch", "train_loss", "train_runtime", "train_samples_per_second"]]


@pytest.mark.slow
@pytest.mark.parametrize("form", ["plain", "colon", "pipe", "slash", "tqdm", "lightning", "keras"])
def test_every_recorded_loss_is_one_the_script_printed(form: str, watch_dir: Path, tmp_path: Path) -> None:
    record = tmp_path / "printed.json"
    script = str(SCRIPTS / "printed_losses.py")
    viewer = _start(watch_dir, sys.executable, script, form, str(STEPS), str(record))
    out, _ = viewer.communicate(timeout=300)
    run = _run(watch_dir)
    assert kinds(run, "end")[0]["state"] == "finished", out[-2000:]
    printed = json.loads(record.read_text())
    recorded = _losses(run)
    # Every printed line is read; a bar's redraws between two reads of the output collapse to the last one.
    assert len(recorded) == STEPS if form not in ("tqdm", "lightning") else recorded, (recorded, printed)
    assert set(recorded.values()) <= set(printed), (recorded, printed)
    if form in NAMED_STEP:
        assert recorded == {step: printed[step - 1] for step in recorded}
    doctor = loratui("doctor", str(run))  # a healthy falling loss: no "rising", no "collapsed to 0"
    assert doctor.returncode == 0 and "no problems found" in doctor.stdout, doctor.stdout
