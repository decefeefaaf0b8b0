"""What is said of the GPU's or CPU's load is not said of the loss: the two batteries (loss words and data
starvation) met on `训练时CPU占满，GPU利用率上不去` (while training the CPU is full and GPU utilisation won't rise),
which the loss reader took as a training run that does not move."""

import pytest

from loratui.logic.advisor import loss_words


@pytest.mark.parametrize("line", [
    "训练时CPU占满，GPU利用率上不去",
    "GPU utilization stays at 30% during training",
    "the GPU usage is stuck at 20% while training",
    "训练的时候显存占用一直不变",
])
def test_the_devices_load_is_not_the_loss(line: str) -> None:
    assert loss_words.read(line) is None


@pytest.mark.parametrize("line", ["训练时loss一直不降", "during training the loss stays at 2.3 and GPU usage is 90%"])
def test_the_loss_beside_it_is_still_read(line: str) -> None:
    said = loss_words.read(line)
    assert said is not None and said.kind == "flat" and said.subject == "loss"


@pytest.mark.parametrize("line", [
    "training stuck, help",
    "the training is stuck at step 500 for an hour",
    "fine-tuning gets stuck at 0% after loading the model",
])
def test_a_run_stuck_with_no_level_is_no_standing_loss(line: str) -> None:
    """`training stuck` with no level after it is a run that makes no progress (the 7th session's own try read it as
    `Loss does not move`); the loss reader leaves it alone."""
    said = loss_words.read(line)
    assert said is None or said.kind != "flat", said


@pytest.mark.parametrize("line", ["the model is stuck at 2.3 and does not learn", "my loss is stuck at 2.3",
                                  "training is stuck around 1.9"])
def test_stuck_at_a_level_is_still_a_standing_loss(line: str) -> None:
    said = loss_words.read(line)
    assert said is not None and said.kind == "flat", said


@pytest.mark.parametrize("line", [
    "the loss is not monotone decreasing, is this right?",
    "the loss does not decrease monotonically",
    "I fine-tuned llama 3 but my loss is decreasing/increasing. I can't figure out why.",
    "my loss increases and decreases all over the place",
    # the pattern of cp-vton#17 (dev), other words
    "It falls overall, but why is my loss always jumping?",
    "the training loss keeps bouncing around, is that normal?",
])
def test_a_loss_that_swings_is_no_rise_and_no_standstill(line: str) -> None:
    """Every minibatch loss swings: `not monotone decreasing` or `decreasing/increasing` says so, not that it rises
    or stands still (ViLT#7 and unsloth#854 were settled as normal)."""
    said = loss_words.read(line)
    assert said is None or said.kind not in ("rise", "flat"), said


@pytest.mark.parametrize("line", ["the loss decreases and then increases after epoch 3",
                                  "the loss keeps jumping up after step 500", "the loss jumped to 9.5 at step 300"])
def test_a_fall_then_a_rise_is_still_a_rise(line: str) -> None:
    said = loss_words.read(line)
    assert said is not None and said.kind == "rise"


@pytest.mark.parametrize("line", [
    # the pattern of PSFT#14 (dev): another variable's value between two of the loss's is not the loss's
    "然后在计算loss时，advantage_mean就会为0，从而导致pg_loss为1",
    "the loss printed 1.0 at every step; when computing it, kl_coef is 0 so policy_loss is 1",
])
def test_another_variables_value_is_not_the_losss(line: str) -> None:
    said = loss_words.read(line)
    assert said is None or said.kind != "rise", said


def test_a_loss_named_in_snake_case_still_rises_in_numbers() -> None:
    said = loss_words.read("the train_loss went from 1.2 to 5.6 after step 300")
    assert said is not None and said.kind == "rise"


@pytest.mark.parametrize("line", [
    # wave 22's dev half (transformers#28488), its sentence
    "The updated code of phi-2 produces a high loss, I have tried fp16, bf16, deepspeed and fsdp the result is the "
    "same -> loss starts at 2 and keeps going higher.",
    "the loss keeps going higher after epoch 2",
])
def test_a_loss_going_higher_is_a_rise_and_the_same_result_is_not_the_loss(line: str) -> None:
    """`keeps going higher` is a rise; `the result is the same` is said of the result (another subject), not of the
    loss named before it."""
    said = loss_words.read(line)
    assert said is not None and said.kind == "rise"


def test_the_loss_said_to_be_the_same_is_still_flat() -> None:
    said = loss_words.read("I retrained twice and the loss is the same, it never decreases")
    assert said is not None and said.kind == "flat"


@pytest.mark.parametrize("line", [
    # the pattern of Chinese-Vicuna#39 (dev): two states by turns, the rise among them
    "为什么loss最开始是2.0左右，后面一会儿变得很大，一会儿又变成0？",
    "the loss sometimes explodes to 1e4 and sometimes drops to 0",
])
def test_a_loss_that_is_huge_and_zero_by_turns_rises(line: str) -> None:
    said = loss_words.read(line)
    assert said is not None and said.kind == "rise", said


@pytest.mark.parametrize("line", ["the loss went up and then dropped to 0", "loss一会儿不变，一会儿变成0"])
def test_one_after_the_other_or_no_rise_by_turns_keeps_the_last(line: str) -> None:
    said = loss_words.read(line)
    assert said is not None and said.kind == "zero", said


@pytest.mark.parametrize("line", [
    # the pattern of HiFi-GAN#59, ParallelWaveGAN#226 and DFST#4 (dev): a GAN's losses move against each other
    "Training my MelGAN vocoder, the adversarial loss keeps increasing after 100k steps, is that normal?",
    "The discriminator loss has stayed at about 0.5 for the whole run.",
    "训练GAN时判别器的loss一直不降",
])
def test_a_gans_losses_in_words_are_no_verdict(line: str) -> None:
    said = loss_words.read(line)
    assert said is None or said.kind == "quiet", said


@pytest.mark.parametrize("line", [
    "the generation quality is fine but the training loss keeps increasing after 100k steps",
    "Using model.fit_generator with my data generator, the loss keeps increasing after epoch 3",
])
def test_a_loss_beside_no_gan_still_rises(line: str) -> None:
    said = loss_words.read(line)
    assert said is not None and said.kind == "rise", said


@pytest.mark.parametrize("text", [
    # the pattern of DRL-code-pytorch's PPO thread (dev): an RL loss growing to a value no objective reaches
    "使用PPO训练时发现critic loss不断增长，甚至会增长到1e18的数量级",
    "使用 PPO 训练时发现 critic loss 不断增长，甚至会增长到 1e18 的数量级",
    "With PPO the critic loss keeps growing and reaches 1e18.",
])
def test_an_rl_loss_grown_past_a_million_diverged(text: str) -> None:
    assert "loss_diverging" in _warned(text)


def test_an_rl_loss_said_to_grow_stays_no_report() -> None:
    assert "loss_diverging" not in _warned("With PPO the critic loss keeps growing, is that normal?")


def _warned(text: str) -> list[str]:
    import io

    from loratui.commands.doctor import diagnose_stream
    return [item.id for item in diagnose_stream(io.BytesIO((text + "\n").encode("utf-8")), "pasted")[0]]
