"""Loss health read from printed series in many layouts (issue 23): the doctor judges the numbers a log prints, in
whatever layout it prints them, and a healthy series in any layout raises nothing. The series are built here from
the pattern (a descent to a plateau with noise, epochs, a tail), not copied from a corpus excerpt."""

from __future__ import annotations

import io
import math
import random

import pytest

from loratui.commands.doctor import diagnose_stream


def first(text: str) -> str:
    """The id of the doctor's first warning or error, `healthy` when it has none."""
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    bad = [i for i in items if i.severity in ("error", "warning")]
    return bad[0].id if bad else "healthy"


def plain(losses: list[float], start: int = 0, every: int = 10) -> str:
    return "".join(f"step {start + every * i} loss {v:.4f} lr 0.0002\n" for i, v in enumerate(losses))


def epochs(losses: list[float]) -> str:
    return "".join(f"Epoch {i} loss: {v:.4f} - acc: 0.5\n" for i, v in enumerate(losses))


def descent(n: int, noise: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [(1.2 + 2.0 * math.exp(-i / (n / 4))) * (1 + noise * rng.gauss(0, 1)) for i in range(n)]


# -- a counter at 0 is no loss of 0 --------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", [plain, epochs])
@pytest.mark.parametrize("n", [5, 12, 40])
def test_a_series_that_starts_at_step_or_epoch_0_is_not_a_zero_loss(layout, n: int) -> None:
    """`step 0 loss 3.6815` is the loss at step 0: the words reader took `0 loss` for `got 0 loss`."""
    assert first(layout(descent(n, 0.02, n))) == "healthy"


@pytest.mark.parametrize("line", [
    "rank 0 loss 2.1034 step 5",
    "[iter 0] loss = 3.1250",
    "batch 0 loss: 0.6931 acc 0.51",
])
def test_a_counter_at_0_before_a_loss_is_not_said_zero(line: str) -> None:
    assert first(line) != "loss_zero"


@pytest.mark.parametrize("text", [
    "some users got 0 loss with this config",
    "I get 0 loss after step 100",
    "at epoch 3 the training loss is 0",
])
def test_a_loss_said_to_be_zero_still_is(text: str) -> None:
    assert first(text) == "loss_zero"


# -- a few logs that fell, then climbed back past their start ------------------------------------------------------

def keras(losses: list[float]) -> str:
    return "".join(f"Epoch {i + 1}/{len(losses)}\n500/500 [==============================] - 12s 24ms/step - "
                   f"loss: {v:.4f} - accuracy: 0.5\n" for i, v in enumerate(losses))


def dicts(losses: list[float]) -> str:
    return "".join(f"{{'loss': {v:.4f}, 'grad_norm': 1.1, 'learning_rate': 0.0002, 'epoch': {(i + 1) / 10:.2f}}}\n"
                   for i, v in enumerate(losses))


CLIMBS = [
    [2.3, 1.8, 1.5, 1.4, 1.6, 2.1, 2.9],  # back past its start in three logs
    [0.9, 0.7, 0.6, 0.65, 0.75, 0.9],  # back to its start
    [4.12, 3.05, 2.61, 2.49, 2.88, 3.51, 4.4, 5.73],
]


@pytest.mark.parametrize("layout", [keras, plain, dicts])
@pytest.mark.parametrize("losses", CLIMBS)
def test_a_loss_that_fell_then_climbed_back_past_its_start_is_divergence(layout, losses: list[float]) -> None:
    """Too few logs for a trend test to pass at p <= 0.01, but a climb in every log since the lowest, back past
    the first log: a maintainer reads it as a learning rate too high once the easy part was learned."""
    items, _ = diagnose_stream(io.BytesIO(layout(losses).encode("utf-8")), "pasted")
    assert items[0].id == "loss_diverging", items
    assert "back past where it started" in " ".join(items[0].evidence), items[0]


@pytest.mark.parametrize("losses", [
    [2.3, 1.8, 1.5, 1.4, 1.6, 2.1],  # rising, but not yet back to its start
    [2.3, 1.8, 1.5, 1.4, 2.0, 2.6],  # only two logs up since the lowest
    [2.3, 1.8, 1.5, 1.4, 1.6, 2.5, 2.4],  # the climb broke
    [2.3, 2.2, 1.9, 1.7, 1.6, 1.52, 1.5, 1.49],  # a healthy descent
    [1.5, 1.49, 1.48, 1.52, 1.55, 1.58],  # no fall before it, and a rise of 7%: not half again the lowest
    [0.31, 0.22, 0.30, 0.21, 0.26, 0.28, 0.33],  # a zigzag whose scatter is as large as the climb
])
def test_no_climb_without_a_fall_a_steady_climb_and_a_return_past_the_start(losses: list[float]) -> None:
    assert first(dicts(losses)) == "healthy"


def test_a_climb_while_the_learning_rate_warms_up_is_not_divergence() -> None:
    text = "".join(f"{{'loss': {v}, 'learning_rate': {2e-5 * (i + 1):.1e}, 'epoch': {(i + 1) / 10:.1f}}}\n"
                   for i, v in enumerate(CLIMBS[0]))
    assert first(text) == "healthy"


# -- a loss at chance level, printed as a logger prints it -----------------------------------------------------------

@pytest.mark.parametrize("layout", [keras, plain, dicts])
@pytest.mark.parametrize("losses", [
    [0.6932, 0.6931, 0.6933, 0.6930, 0.6931],  # ln 2 = 0.69315: `0.6930` is read back as 0.693
    [1.6098, 1.6091, 1.6101, 1.6090, 1.6096],  # ln 5 = 1.60944, scattering in the 4th digit
])
def test_a_loss_scattering_in_its_last_digit_around_ln_k_is_chance_level(layout, losses: list[float]) -> None:
    items, _ = diagnose_stream(io.BytesIO(layout(losses).encode("utf-8")), "pasted")
    assert items[0].id == "loss_flat" and "ln " in items[0].title, items


@pytest.mark.parametrize("losses", [
    [0.6981, 0.6962, 0.6940, 0.6921, 0.6899, 0.6880],  # falling through ln 2, 0.3% a log
    [1.62, 1.59, 1.63, 1.60, 1.58, 1.61],  # near ln 5, scattering 1%
    [2.3, 2.3, 2.3, 2.3, 2.3],  # two digits cannot tell ln 10 = 2.3026 from 2.30
])
def test_a_loss_passing_near_ln_k_is_not_chance_level(losses: list[float]) -> None:
    assert first(dicts(losses)) != "loss_flat"


# -- a worried question beside a short series that falls ----------------------------------------------------------

FALLING6 = [2.31, 1.98, 1.72, 1.55, 1.41, 1.33]


@pytest.mark.parametrize("layout", [plain, dicts, keras])
@pytest.mark.parametrize("words", [
    "Why is my loss not decreasing?",
    "The loss is stuck, is this normal?",
    "my loss keeps increasing, what is wrong?",
    "训练的时候loss不下降",
])
def test_words_that_say_flat_or_rising_yield_to_a_short_series_that_falls(layout, words: str) -> None:
    """Six logs falling 42% and still falling at the end: the numbers show the loss moving, whatever the worry."""
    assert first(words + "\n" + layout(FALLING6)) == "healthy"


@pytest.mark.parametrize("losses", [
    [2.3, 1.6, 1.52, 1.50, 1.51, 1.50, 1.51],  # fell, then stood still: what the words may be about
    [1.52, 1.49, 1.51, 1.50, 1.48, 1.50],  # never fell
    [2.31, 1.98, 1.72, 1.55, 1.60],  # fell, then turned up
    [2.31, 2.2, 2.1, 2.05, 2.0],  # fell by 13%: not a fifth
])
def test_words_that_say_flat_stand_beside_a_short_series_that_does_not_fall_through(losses: list[float]) -> None:
    assert first("Why is my loss not decreasing?\n" + dicts(losses)) == "loss_flat"


# -- a GAN's two losses are adversaries, not a training loss ----------------------------------------------------------

def gan(d_losses: list[float], g_losses: list[float]) -> str:
    """The layout of eriklindernoren/PyTorch-GAN's scripts."""
    return "".join(f"[Epoch 0/200] [Batch {i * 50}/938] [D loss: {d:.6f}] [G loss: {g:.6f}]\n"
                   for i, (d, g) in enumerate(zip(d_losses, g_losses)))


def test_a_discriminator_at_ln_2_is_no_chance_level_and_a_rising_generator_no_divergence() -> None:
    assert first(gan([0.693147, 0.693101, 0.693192, 0.693120, 0.693150], [0.69, 0.71, 0.74, 0.8, 0.9])) == "healthy"
    assert first(gan([0.69, 0.5, 0.4, 0.3, 0.25, 0.2], [0.7, 1.2, 1.9, 2.5, 3.1, 3.8])) == "healthy"
    assert first("epoch 3 d_loss=0.52 g_loss=1.9\nepoch 4 d_loss=0.52 g_loss=2.9\n" * 3) == "healthy"


def test_a_gan_whose_losses_go_nan_is_still_nan() -> None:
    assert first(gan([0.69, 0.52], [0.7, 1.1]) + "[Epoch 0/200] [Batch 100/938] [D loss: nan] [G loss: nan]\n") == \
        "nan_loss"


# -- a progress bar's postfix redrawn unchanged is one reading --------------------------------------------------------

def staircase_bar(every: int = 10, steps: int = 60) -> str:
    """A bar redrawn each step whose loss postfix a script refreshes every `every` steps
    (`if step % every == 0: bar.set_postfix(loss=...)`)."""
    lines, loss = [], 2.5
    for i in range(1, steps + 1):
        if i % every == 1:
            loss = round(loss * 0.95, 4)
        lines.append(f"Training:  {i * 100 // steps}%|███       | {i}/{steps} [00:{i:02d}<00:10,  2.00it/s, "
                     f"loss={loss:.4f}, lr=2e-4]")
    return "\n".join(lines)


@pytest.mark.parametrize("sep", ["\n", "\r"])
def test_a_postfix_refreshed_every_few_steps_is_no_repeating_loss(sep: str) -> None:
    """The same `loss=2.3750` over ten redraws read as ten logs: `Loss stays at 2.375: the weights are not
    changing`, for a loss falling 2.5 -> 1.84."""
    assert first(staircase_bar().replace("\n", sep)) == "healthy"


def test_each_epochs_bar_still_counts_its_own_postfix() -> None:
    """Epoch after epoch the same `loss=0.693` (ln 2): each epoch's bar is a reading of its own."""
    text = "".join(f"Epoch {e}: 100%|██████████| 50/50 [00:10<00:00,  4.9it/s, loss=0.693, v_num=1]\n"
                   for e in range(6))
    assert first(text) == "loss_flat"


# -- a rise said to pass is no divergence -----------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "The loss spikes occasionally but recovers quickly.",
    "The loss jumps up at the beginning of each epoch.",
    "There is a jump in the training loss at the start of every epoch.",
    "The loss increases sharply around step 300, then comes back down after a few hundred steps.",
    "Loss spiked to 5.2 at step 1200 and then settled back to 1.3.",
    "loss突然上升，然后又恢复了",
    "每个epoch开始的时候loss会上升一下",
    # darknet#638: numbers that rise, then a fall said after them
    "The avg loss started at around 14, went way up to 21 after a few iterations, and then started coming down.",
])
def test_a_rise_said_to_recover_or_to_recur_at_each_epochs_start_is_no_divergence(text: str) -> None:
    assert first(text) == "healthy"


@pytest.mark.parametrize("text", [
    "The loss increases every epoch.",  # a steady climb, epoch after epoch
    "The loss spikes and never recovers.",
    "The loss exploded and does not come back down.",
    "The loss jumps to 8.0 at step 500 and stays there.",
    "The loss decreases first and then increases.",
    "The loss went from 1.2 to 3.5 and then started going up faster.",
    "The loss went up and didn't go back down.",
])
def test_a_rise_that_does_not_pass_is_still_divergence(text: str) -> None:
    assert first(text) == "loss_diverging"


@pytest.mark.parametrize("text, says", [
    ("训练loss在波动，这正常吗？", "healthy"),  # fluctuating, with no level: noise, as `the loss fluctuates` in English
    ("loss波动很大", "healthy"),
    ("loss一直在2.3左右波动", "loss_flat"),  # fluctuating around a level: a plateau
    ("loss在0.5附近震荡", "loss_flat"),
    ("loss一直在1.2到1.5之间波动", "loss_flat"),
])
def test_a_chinese_loss_that_fluctuates_is_flat_only_around_a_level(text: str, says: str) -> None:
    assert first(text) == says


# -- a standstill that a later clause ends ------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "The loss did not decrease for the first 50 steps (warmup) but then started dropping.",
    "The loss is fluctuating between 0.8 and 1.2 but trending down.",
    "The loss stayed at 2.3 for a while, then it decreased steadily to 1.1.",
    "For the first epoch the loss was stuck around 4.6, but after that it began to go down.",
])
def test_a_standstill_that_ends_in_a_fall_is_no_flat_loss(text: str) -> None:
    """Where the loss went last counts: a plateau the same line says it left is a run that learns."""
    assert first(text) == "healthy"


@pytest.mark.parametrize("text, says", [
    ("The loss decreased at first, but then it stopped decreasing.", "loss_flat"),  # the standstill comes last
    ("The loss went down a bit, then stayed at 2.3 for the rest of training.", "loss_flat"),
    ("The loss decreases but the accuracy stays at 0.1.", "loss_flat"),  # another subject's standstill
    ("The loss stopped decreasing, then it started to increase.", "loss_diverging"),
])
def test_a_standstill_after_a_fall_or_of_another_subject_still_counts(text: str, says: str) -> None:
    assert first(text) == says


@pytest.mark.parametrize("text", [
    "The loss increased a bit after I resumed, then kept going down.",
    "The training loss went up slightly in the last epoch.",
    "The loss does not decrease as fast as with the old version.",
    "My loss isn't going down as quickly as in the paper's curve.",
])
def test_a_small_rise_or_a_slower_fall_is_no_divergence_or_flat_loss(text: str) -> None:
    assert first(text) == "healthy"


@pytest.mark.parametrize("text, says", [
    ("The training loss went up a lot in the last epoch.", "loss_diverging"),
    ("The loss does not decrease at all.", "loss_flat"),
    ("The loss only decreased a bit, from 2.31 to 2.29.", "loss_flat"),  # a fall said to be too small
])
def test_a_large_rise_or_a_fall_that_does_not_happen_still_counts(text: str, says: str) -> None:
    assert first(text) == says


@pytest.mark.parametrize("text, says", [
    ("grad_norm is always 0.", "loss_flat"),  # the sentence's full stop is no decimal point
    ("The learning rate is 0.", "loss_flat"),
    ("The loss is identical for all epochs.", "loss_flat"),
    ("The loss is the same for every epoch.", "loss_flat"),
    ("The loss is 0.5 now.", "healthy"),
    ("The loss is the same for both models.", "healthy"),  # a comparison, no history
])
def test_a_value_or_a_sameness_at_a_sentences_end(text: str, says: str) -> None:
    assert first(text) == says


@pytest.mark.parametrize("text, says", [
    ("loss突然变得很大", "loss_diverging"),  # `becomes very large`, the adverb between 变得 and 大
    ("loss变得越来越大", "loss_diverging"),
    ("loss变得很小", "healthy"),
    ("val loss变得很大", "loss_diverging"),  # a validation loss rising: overfitting, its own advice
])
def test_a_chinese_loss_said_to_become_large(text: str, says: str) -> None:
    assert first(text) == says


@pytest.mark.parametrize("text, says", [
    ("My loss went to NaN when I increased the learning rate.", "nan_loss"),  # the person raised the setting
    ("The loss became nan after we increased the batch size to 64.", "nan_loss"),
    ("The loss increased when I raised the learning rate.", "loss_diverging"),  # the loss itself rose
    ("The loss went up after the warmup.", "loss_diverging"),
])
def test_a_setting_the_person_raised_is_no_rising_loss(text: str, says: str) -> None:
    assert first(text) == says


@pytest.mark.parametrize("text, says", [
    ("Both training and validation loss increase after epoch 5.", "loss_diverging"),  # the training loss rises too
    ("The train and val losses both go up.", "loss_diverging"),
    ("The training and validation loss do not decrease.", "loss_flat"),
    ("the train/val loss are decreasing", "healthy"),
    ("The validation loss increases after epoch 5.", "loss_diverging"),  # the validation loss alone: overfitting
])
def test_training_and_validation_loss_named_together_include_the_training_loss(text: str, says: str) -> None:
    assert first(text) == says


@pytest.mark.parametrize("text, says", [
    # Qihoo360/Light-R1#22: a preference loss named beside Chinese, where `\b` finds no word boundary
    ("做dpo训练时，loss没有下降反上升，请问这是正常的吗？", "healthy"),
    ("用grpo训练，loss一直为0", "healthy"),
    ("做sft训练时，loss没有下降反上升", "loss_diverging"),  # a language model's loss
    ("my happo loss increases", "loss_diverging"),  # `ppo` inside a name is no PPO
])
def test_a_preference_or_rl_objective_named_beside_chinese_is_no_lm_loss(text: str, says: str) -> None:
    assert first(text) == says


@pytest.mark.parametrize("text, says", [
    # THUDM/GLM#88: the staircase of a multi-epoch run on a small dataset
    ("the training loss barely decrease within each epoch, but there is a large decrease when starting a new epoch.",
     "healthy"),
    ("The loss stays flat within each epoch and drops at each new epoch.", "healthy"),
    ("loss每个epoch内基本不变，新的epoch开始时突然下降", "healthy"),
    ("The loss does not decrease at all, even after 10 epochs.", "loss_flat"),
    ("The loss is stuck at 2.3 for every epoch.", "loss_flat"),
])
def test_a_standstill_within_each_epoch_that_drops_at_the_next_is_a_staircase(text: str, says: str) -> None:
    assert first(text) == says


# -- a diffusion model's loss looks flat while it learns ---------------------------------------------------------------

@pytest.mark.parametrize("text", [
    # huggingface/diffusers#3604
    ("I am using train_text_to_image.py to fine-tune the text-to-image stable diffusion model on my own dataset.\n"
     "However, **the train loss does not decrease** but rather stays the same with some fluctuations for 15K steps."),
    "Training a DreamBooth LoRA on SDXL, the loss is stuck around 0.1 the whole time, is that normal?",
    "kohya LoRA training: avr_loss stays at 0.09 and does not go down.",
    "我用diffusers训练stable diffusion，loss一直不下降",
])
def test_a_diffusion_models_loss_said_to_stay_flat_is_no_flat_loss(text: str) -> None:
    assert first(text) == "healthy"


@pytest.mark.parametrize("text, says", [
    ("Fine-tuning Llama-2 with LoRA, the loss is stuck around 2.3 the whole time.", "loss_flat"),
    ("With diffusers the loss suddenly explodes to 1e4 after 2k steps.", "loss_diverging"),  # only flat words yield
    ("Training stable diffusion, the loss becomes NaN after 100 steps.", "nan_loss"),
])
def test_other_models_flat_words_and_a_diffusion_models_other_trouble_still_count(text: str, says: str) -> None:
    assert first(text) == says


@pytest.mark.parametrize("text, says", [
    # TencentARC/LLaMA-Pro#29: 无法 (cannot) negates, and the run compared against is another run
    ("目前看上去到20k step左右 loss就无法继续下降了。对比直接在qwen上面增量预训练依然在下降。", "loss_flat"),
    ("loss难以下降", "loss_flat"),
    ("loss无法收敛", "loss_flat"),
    ("With LoRA the loss stops decreasing at 1.5. Compared with full fine-tuning, it keeps going down.", "loss_flat"),
    ("The loss stopped decreasing at step 500. Then it started dropping again.", "healthy"),  # this run, not another
    ("loss下降了，无法理解为什么效果不好", "healthy"),
])
def test_cannot_negates_and_a_run_told_as_the_reference_is_another_run(text: str, says: str) -> None:
    assert first(text) == says


@pytest.mark.parametrize("text, says", [
    # zai-org/ChatGLM3#738: 5 -> 4 -> 7, told with 至 (to) and 在 (at)
    ("loss一开始从5缓慢往下降，降至4后就不再降低，从step1700开始逐渐上升，最后一直保持在7左右。", "loss_diverging"),
    # fell a third, then held a learned level: the curve's usual shape, no standstill (LlamaFactory#987, dev healthy:
    # `开始loss为1.9，几十个step之后就在1.5附近不再下降`, the maintainer: this dataset's loss is that high)
    ("loss从2.3降到1.5，在1.5附近波动", "healthy"),
    ("loss从3.2降至1.1", "healthy"),
])
def test_a_chinese_loss_history_told_in_numbers(text: str, says: str) -> None:
    assert first(text) == says


@pytest.mark.parametrize("text, says", [
    # TensorFlow's NanTensorHook names the NaN with the word `diverged`
    ("INFO:tensorflow:loss = 2.31, step = 100\nERROR:tensorflow:Model diverged with loss = NaN.", "nan_loss"),
    ("tensorflow.python.training.basic_session_run_hooks.NanLossDuringTrainingError: NaN loss during training.",
     "nan_loss"),
    ("The model diverged after 3 epochs.", "loss_diverging"),
    # a divergence told with its NaN in one sentence: threads settle on the NaN (16 dev records against 1, twenty-third
    # session); a rise told apart from a NaN the log printed later stays the divergence (test_evidence_once)
    ("training diverged, loss became nan at step 300", "nan_loss"),
])
def test_tensorflows_nan_check_is_a_nan_not_a_rise(text: str, says: str) -> None:
    assert first(text) == says


@pytest.mark.parametrize("text", [
    "loss在第5个epoch突然变成了很大的值",  # became a very large value
    "loss从0.3一下子跳到了5",  # jumped to 5
    "at epoch 12 loss is 0.8, at epoch 13 it's 4.5",  # `it's` gives the loss's value too
    "I see a huge loss spike at 5k steps that the model never recovers from.",  # `loss spike`: the noun
])
def test_a_rise_told_as_a_jump_a_large_value_or_a_spike(text: str) -> None:
    assert first(text) == "loss_diverging"


@pytest.mark.parametrize("text", [
    "Occasional loss spikes, but it recovers quickly.",
    "loss先跳到5然后又恢复了",
])
def test_a_spike_or_jump_that_recovers_is_still_no_divergence(text: str) -> None:
    assert first(text) == "healthy"


@pytest.mark.parametrize("text, says", [
    ("The loss is 2.302 at every epoch.", "loss_flat"),  # one value, said of each epoch
    ("The loss decreases at every epoch.", "healthy"),
    ("The loss is 0.5 after each epoch of fine-tuning, then 0.4.", "healthy"),  # two values: a history
    ("loss was 0.3, now it is 4.5.", "loss_diverging"),  # a value that ends its sentence is a value
])
def test_one_value_said_of_every_epoch_is_a_standstill(text: str, says: str) -> None:
    assert first(text) == says


# -- Keras epoch summaries lie an epoch's steps apart ---------------------------------------------------------------

@pytest.mark.parametrize("losses", [
    [1.4482, 1.4472, 1.4485, 1.4467, 1.4445, 1.4519],  # six epochs within 0.5% from the first
    [10.37, 10.38, 10.36, 10.37, 10.38, 10.37],
])
def test_keras_epoch_summaries_that_never_fell_from_the_first_are_flat(losses: list[float]) -> None:
    """Each line closes an epoch of 500 batches: numbered 1, 2, 3 they spanned 6 steps, too few to judge; as the run
    counted them they span 2,500."""
    assert first(keras(losses)) == "loss_flat"


@pytest.mark.parametrize("losses", [
    [0.2531, 0.1012, 0.0711, 0.0534, 0.0431, 0.0398],  # MNIST-like: fast, then slow
    [0.5123, 0.5101, 0.5089, 0.5072, 0.5060, 0.5049],  # slow but steady: a trend
])
def test_keras_epoch_summaries_that_fall_are_healthy(losses: list[float]) -> None:
    assert first(keras(losses)) == "healthy"


def test_keras_batches_count_on_across_epochs() -> None:
    from loratui.logic.text_reader import TextReader

    reader = TextReader()
    text = keras([2.3, 2.1, 1.9]).splitlines()
    found = [e for line in text for e in reader.feed(line)] + reader.close()
    assert [e.step for e in found if type(e).__name__ == "Log"] == [500, 1000, 1500]


@pytest.mark.parametrize("text, says", [
    ("训练了10个epoch，loss还是2.3", "loss_flat"),  # still 2.3
    ("loss基本持平", "loss_flat"),
    ("loss收敛不了", "loss_flat"),
    ("训练loss不降，验证loss上升", "loss_flat"),  # 验证 (validation): its rise is overfitting, the flat training loss counts
    ("验证集loss一直上升，训练loss下降", "loss_diverging"),  # overfitting, its own advice (loss_battery.OVERFIT)
    ("测试集上的loss变大了", "loss_diverging"),
])
def test_chinese_standstills_and_a_validation_loss_named_in_chinese(text: str, says: str) -> None:
    assert first(text) == says


@pytest.mark.parametrize("text, says", [
    ("Why is the training loss zero?", "loss_zero"),  # a question puts the verb before its subject
    ("Why is my loss 0?", "loss_zero"),
    ("Why is my loss 0.5?", "healthy"),
    ("Is the loss 0.05 normal?", "healthy"),
    ("Why is the val loss 0?", "healthy"),  # a validation loss
])
def test_a_loss_asked_about_as_zero(text: str, says: str) -> None:
    assert first(text) == says


# -- a series listed in one line ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, says", [
    ("loss per epoch: 0.51 0.48 0.62 0.95 1.7", "loss_diverging"),
    ("loss history: [0.9, 0.7, 0.6, 0.8, 1.3, 2.2]", "loss_diverging"),
    ("losses by epoch: 3.2, 2.1, 1.5, 1.2, 1.0", "healthy"),
    # nickgreenquist/cu2rec#3: a test's losses falling every iteration
    ("Losses: 161.9 160.99 160.988 160.076 160.072 159.159 159.153 158.238 158.23 157.314", "healthy"),
    ("loss weights: 1.0, 0.5, 0.5, 0.1", "healthy"),  # a setting's values, not a history
])
def test_losses_listed_in_one_line_are_a_series(text: str, says: str) -> None:
    assert first(text) == says


def test_a_listed_series_is_read_in_order() -> None:
    from loratui.logic.text_reader import values

    assert values.loss_list("loss history: [0.9, 0.7, 1.3, 2.2]") == [0.9, 0.7, 1.3, 2.2]
    assert values.loss_list("the losses of the 4 heads are 0.3 0.2 0.5 0.1") == []  # not right after the name
    assert values.loss_list("loss: 2.3 lr: 0.1 step 5 10") == []
