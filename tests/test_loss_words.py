"""A loss said to stay put or to rise, in the words people use (issue 23): a battery built from the PATTERNS of
such reports (tool, layout, casing, person, tense, language varied), not from any one corpus excerpt, read end to
end by `loratui doctor`; and the sentences that must stay quiet (suppositions, code, a validation loss,
an RL objective, a slow start that then falls, a healthy log)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loratui.cli import main


def doctor(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    path = tmp_path / "pasted.txt"
    path.write_text(text, encoding="utf-8")
    main(["doctor", str(path), "--json", "--no-guess"])  # the rules alone: the word guess is tests/test_word_guess.py
    return json.loads(capsys.readouterr().out)


FLAT = [
    "my loss stays at 2.3 no matter what I try\n",
    "The loss doesn't change at all.\n",
    "loss not decreasing after 10 epochs\n",
    "LOSS NOT DECREASING WITH QLORA ON MISTRAL\n",
    "There is no improvement in loss after 5 epochs.\n",
    "the model isn't learning anything\n",
    "My model is not learning, what am I doing wrong?\n",
    "The network does not learn even on a tiny subset.\n",
    "the loss fluctuates around 2.1 and never goes down\n",
    "Loss oscillates between 4.4 and 4.6 for the whole run.\n",
    "the loss won't go below 2.0\n",
    "Training loss stagnates at 4.5 from epoch 2 on.\n",
    "the loss stopped decreasing after 100 steps\n",
    "The training loss plateaus at 1.9.\n",
    "we see the loss hovering around 0.69\n",
    "模型不收敛，换了学习率也一样\n",
    "训练了三个epoch模型一直不收敛\n",
    "loss一直不降\n",
    "loss卡在2.3\n",
]

RISE = [
    "training diverges after 1k steps\n",
    "The model diverged at step 3000 with bf16.\n",
    "Our fine-tuning run diverges when lr is 1e-3.\n",
    "the loss is getting worse each epoch\n",
    "Loss getting worse and worse after warmup\n",
    "after epoch 4 the loss becomes huge\n",
    "The train loss went astronomical after I resumed.\n",
    "训练到一半模型突然发散\n",
]


@pytest.mark.parametrize("text", FLAT)
def test_a_loss_said_to_stay_put_is_flat(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor(text, tmp_path, capsys)
    assert items and items[0]["id"] == "loss_flat", items


@pytest.mark.parametrize("text", RISE)
def test_training_said_to_rise_or_diverge_is_divergence(text: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor(text, tmp_path, capsys)
    assert items and items[0]["id"] == "loss_diverging", items


HEALTHY = "".join(f"{{'loss': {2.5 * 0.97 ** i:.4f}, 'learning_rate': 0.0002, 'epoch': {i / 100:.2f}}}\n"
                  for i in range(60))


@pytest.mark.parametrize("text", [
    "the loss decreases slowly at first, then falls fast after warmup\n",
    "What if the loss is stuck? We save a checkpoint every epoch anyway.\n",
    "How to check whether the model is not learning?\n",
    "validation loss stays at 0.5 while train loss falls\n",
    "the loss decreased from 2.3 to 0.4 and the model learns well\n",
    "GRPO loss is 0 at the first step, which is expected\n",
    "if the training diverges, lower the learning rate\n",
    "the model converged after 3 epochs\n",
    "    model_diverged = check(loss)\n",
    "the model is learning fine\n",
    HEALTHY,
])
def test_words_that_suppose_or_name_another_quantity_are_quiet(text: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert [i["id"] for i in doctor(text, tmp_path, capsys)] == []
