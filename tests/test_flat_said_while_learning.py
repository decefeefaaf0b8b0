"""A loss said to stand still while the model learns is not a run that does not train: a diffusion objective's loss
(the noise prediction's error, led by the sampled timestep) stays level while samples improve, and any loss whose
results the person says improve has reached its floor (issue 23, wave 11's dev half); a person who asks whether the
level loss is normal reports a worry, not a failure (wave 13's dev half)."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream


def warned(text: str) -> list[str]:
    """The ids of the doctor's errors and warnings for a pasted text."""
    items = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")[0]
    return [item.id for item in items if item.severity in ("error", "warning")]


@pytest.mark.parametrize("text", [
    "Looking at the logs, the diffusion loss did not decrease during training and fluctuates a lot. Why?",
    "The loss is stuck at around 0.9, but the results kept improving. How should I read that?",
    "My loss stays at 1.2 for the last 3 epochs, yet the generated samples look great.",
    "loss一直在0.5左右不变，但是效果很好",
    # the person asks whether a level loss is normal: a worry the thread answers, not a report that it does not train
    "I noticed that the loss isn't decreasing. Instead, it's fluctuating. Is this normal?",
    "Is it expected to see the loss not go down during training?",
    "训练第一阶段loss不下降，这正常吗",
    "Is it normal when training stage 1 that the loss doesn't decrease?",  # a digit in a name gives no level
])
def test_a_still_loss_beside_learning_is_no_flat_loss(text: str) -> None:
    assert "loss_flat" not in warned(text)


@pytest.mark.parametrize("text", [
    "The loss is stuck at 2.3 and the results are not good either.",
    "The loss is stuck at 2.3; if the outputs look fine I will stop early.",
    "The loss stays at 2.3 for 500 steps, the learning rate is 2e-4.",
    "Is it normal that the loss is stuck at 2.3 for 3000 steps?",  # a question that gives the numbers reports them
])
def test_a_still_loss_without_results_said_good_is_flagged(text: str) -> None:
    assert "loss_flat" in warned(text)


@pytest.mark.parametrize("text", [
    "The loss is 0.0 from the very first step, although the outputs look fine.",
    "My loss is 0 from the first step. Is this normal?",
])
def test_a_zero_loss_is_flagged_whatever_the_results(text: str) -> None:
    """A loss of exactly 0 scores nothing, good results or not, asked about or not (labels all masked)."""
    assert warned(text)


@pytest.mark.parametrize("text", [
    # yolov5#10209 and DeepLabCut#287 (wave 16's dev half): the maintainers' answer was that it is normal
    "I have noticed that there is a spike in training / validation loss, coinciding with end of warmup phase. "
    "Is this normal?",
    "Are lr and loss supposed to be possible to increase at some point?\nThey increased.",
    "The loss goes up while the learning rate warms up, is this expected?",
])
def test_a_rise_asked_about_beside_the_lrs_own_rise_is_no_report(text: str) -> None:
    """Mechanism: a schedule that raises the learning rate (warm-up, its end) raises the loss for a while, and a person
    who asks whether that is normal reports a worry the thread answers, not a run that diverges."""
    assert "loss_diverging" not in warned(text)


@pytest.mark.parametrize("text", [
    "Why is the loss increasing? Is this normal? I use --learning_rate 5e-4 --batch_size 4",  # openvla#98: no lr rise
    "The loss rises to 3.5 right after warmup, is this normal?",  # a level given: a report
    "The learning rate is high and the loss increases every epoch.",  # no question
])
def test_a_rise_without_the_lrs_own_rise_or_with_a_level_is_still_reported(text: str) -> None:
    assert "loss_diverging" in warned(text)


@pytest.mark.parametrize("text", [
    "Training PPO on my env: the episode reward reaches 480 but the loss is on the rise. Why?\n",
    "For reinforcement learning with my DDQN agent the loss is increasing, could you please help.\n",
    "value_loss keeps increasing while the agent trains\n",
    "the policy loss goes up over steps in my GRPO run, which seems problematic\n",
])
def test_an_rl_loss_said_to_rise_is_no_report(text: str) -> None:
    """Wave 21's dev half: an RL loss is no measure of progress (the value or Q target moves as the policy improves):
    the maintainers answer that a rise is normal and to watch the reward (muzero-general#96, coach#214, fql#10,
    ml-agents#280, open-instruct#836). Written for this test, in those threads' manner."""
    assert "loss_diverging" not in warned(text)


def test_every_reader_knows_the_same_rl_objectives() -> None:
    """advisor/objectives.py: RLOO named on one line is RL to the whole text (core._RL) as it was to the sentence
    readers, like PPO; each reader listed its own names before."""
    assert "loss_diverging" not in warned("We fine-tune Qwen with RLOO.\nThe loss keeps going up over time.\n")


def test_a_classic_agents_loss_said_to_be_zero_is_still_a_report() -> None:
    """A GRPO loss is 0 at its first steps by design; a DQN's at 0 means its targets equal its predictions."""
    assert "loss_zero" in warned("My DQN loss is 0 after 1000 episodes\n")


@pytest.mark.parametrize("text", [
    "The loss keeps increasing after epoch 3 on my classifier\n",  # no RL: still a report
    "During DPO the loss stays at 0.6931:\n{'loss': 0.6931, 'rewards/chosen': 0.0, 'rewards/rejected': 0.0, "
    "'rewards/margins': 0.0, 'epoch': 0.59}\n",  # DPO's implicit rewards are no RL reward
])
def test_a_rise_or_flat_outside_rl_is_still_reported(text: str) -> None:
    assert {"loss_diverging", "loss_flat"} & set(warned(text))


@pytest.mark.parametrize("text", [
    # wave 22's dev half (trl#1311), its sentence: the rewards are said to stand at zero, no DPO named in it
    "I get this type of behavior where both the rewards stay at 0 and the loss never goes down\n",
    "In my PPO run the reward never increases and the loss stays flat.\n",
])
def test_a_loss_said_still_beside_a_reward_said_still_is_reported(text: str) -> None:
    """The reward an RL or preference objective is judged by, said itself to stand at zero or never rise, is no
    excuse for the loss beside it: nothing is learned."""
    assert "loss_flat" in warned(text)


def test_an_rl_loss_said_still_beside_a_reward_that_rises_is_no_report() -> None:
    assert "loss_flat" not in warned("GRPO: the loss never goes down but the reward increases.\n")


@pytest.mark.parametrize("text", ["多卡训练时loss卡住不降\n", "训练时loss卡住不降\n"])
def test_a_loss_said_stuck_in_chinese_is_flat_not_a_hang(text: str) -> None:
    """`卡住` is a hang or a loss that stays put; with the loss named (its letters touching the characters) it is the
    loss."""
    assert "loss_flat" in warned(text)
