"""A zero loss stated once in prose is a zero loss (trial 11: `loratui doctor -` on a stated zero loss gave no finding
for some wordings; `loss: 0 all the time` read as a loss that does not move, whose advice checks the learning rate
rather than the labels a zero loss points at). The sentences are this file's own, none from the corpus; the
negatives (another value, a fall, a zero-shot evaluation) stay quiet. The rules alone (`--no-guess`)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_loss_words import doctor

ZERO = [
    "my loss is 0.0 from the first step\n",
    "loss: 0 all the time\n",
    "the train loss shows 0.0 after the first step\n",
    "the loss is equal to zero after 100 steps\n",
    "Training loss reads 0.0000 in the progress bar from step 1.\n",
    "The loss is stuck at 0 and the model learns nothing.\n",
    "the loss is 0.0 all the time, is my data wrong?\n",
    "my training loss printed 0 for every logging step\n",
]
QUIET = [
    "my loss is 0.0123 after 3 epochs\n",
    "loss went from 2.0 to 0.5\n",
    "zero-shot accuracy is 0.0 before fine-tuning\n",
    "the zero-shot loss is 0.0 on this toy set\n",
    "the 5-shot eval loss is 0 because the answers are in the prompt\n",
    "the loss shows 0.5 after the first epoch\n",
]


@pytest.mark.parametrize("text", ZERO)
def test_a_stated_zero_loss_is_loss_zero(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor(text, tmp_path, capsys)
    assert items and items[0]["id"] == "loss_zero", (text, items)


@pytest.mark.parametrize("text", QUIET)
def test_other_values_falls_and_zero_shot_evaluations_stay_quiet(text: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor(text, tmp_path, capsys)
    assert not [i for i in items if i["id"] in ("loss_zero", "loss_flat")], (text, items)


def test_a_level_at_zero_is_zero_but_a_level_above_it_stays_flat(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert doctor("loss: 2.3 all the time\n", tmp_path, capsys)[0]["id"] == "loss_flat"
    assert doctor("the loss is stuck at 0.05\n", tmp_path, capsys)[0]["id"] == "loss_flat"
