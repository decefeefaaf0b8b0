"""A loss of exactly 0 in a pasted text's only log, and a gradient said to be zero under an RL objective (session 17,
from the dev split's misses: `I got training loss=0.00 when doing lora finetuning` and a single printed dict with
`'loss': 0.0` said nothing, as a second zero log was waited for; `GRPO ... loss和grad_norm都为0` was excused as an RL
loss that need not fall). The sentences are this file's own, none from the corpus. The rules alone (`--no-guess`)."""
from __future__ import annotations

from pathlib import Path

import pytest

from loratui import events
from loratui.logic.advisor import Advisor
from tests.test_loss_words import doctor

LONE_ZERO = [
    "After the first logging step I see training loss=0.00 on my own data.\n",
    "{'loss': 0.0, 'learning_rate': 2e-05, 'epoch': 0.05}\n",
    "step 20 | loss 0.0000 | lr 1e-4\n",
]
QUIET = [
    "{'loss': 1.734, 'learning_rate': 2e-05, 'epoch': 0.05}\n",  # one real loss: nothing to judge yet
    "{'loss': 0.0, 'grad_norm': 0.31, 'learning_rate': 1e-06, 'epoch': 0.05, 'reward': 0.41, 'reward_std': 0.2}\n",
    "with GRPO the loss is 0 at the first steps\n",  # a GRPO loss is 0 at its first steps by design
    "with GRPO the grad norm stays around 0.3\n",
]
NO_GRADIENT = [
    "during GRPO training the grad_norm is always 0\n",
    "with GRPO the loss and grad_norm are both 0 for every step\n",
    "PPO训练时loss和grad_norm都为0\n",
]


@pytest.mark.parametrize("text", LONE_ZERO)
def test_a_pasted_texts_only_log_at_zero_is_loss_zero(text: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor(text, tmp_path, capsys)
    assert items and items[0]["id"] == "loss_zero", (text, items)


@pytest.mark.parametrize("text", QUIET)
def test_a_real_loss_and_an_rl_objectives_zero_stay_quiet(text: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor(text, tmp_path, capsys)
    assert not [i for i in items if i["id"] in ("loss_zero", "loss_flat")], (text, items)


def test_a_lone_zero_beside_a_nan_gradient_is_the_nan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor("{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 2e-05, 'epoch': 0.05}\n", tmp_path, capsys)
    assert items and items[0]["id"] == "nan_loss", items


def test_a_live_run_waits_for_a_second_log() -> None:
    """Live, the next log may show a real loss: one zero is no finding until a second follows."""
    zero = {"loss": 0.0, "learning_rate": 2e-05}
    advisor = Advisor(None).feed_all([events.Log(t=1.0, step=10, values=zero)])
    assert [i.id for i in advisor.items()] == []
    advisor.feed(events.Log(t=2.0, step=20, values=zero))
    assert [i.id for i in advisor.items()] == ["loss_zero"]


@pytest.mark.parametrize("text", NO_GRADIENT)
def test_no_gradient_under_an_rl_objective_is_no_learning(text: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor(text, tmp_path, capsys)
    assert items and items[0]["id"] == "loss_flat", (text, items)


def test_both_at_zero_is_a_zero_loss(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor("during fine-tuning the loss and grad_norm are both 0\n", tmp_path, capsys)
    assert items and items[0]["id"] == "loss_zero", items
