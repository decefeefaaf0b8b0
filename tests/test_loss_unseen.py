"""Loss health on text of shapes the first rules never saw (issue 23): a loss that steps up to a new level over a
handful of epoch summaries, a loss sitting at chance (ln k), a zero training loss beside a NaN eval loss.
Each rule is built from the pattern; where a real line is quoted, its source is named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loratui import events
from loratui.cli import main
from loratui.logic.advisor import Advisor


def doctor(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    path = tmp_path / "pasted.txt"
    path.write_text(text, encoding="utf-8")
    main(["doctor", str(path), "--json", "--no-guess"])  # the rules alone: the word guess is tests/test_word_guess.py
    return json.loads(capsys.readouterr().out)


def logs(losses: list[float], **extra: Any) -> list[events.Log]:
    return [events.Log(t=float(i), step=i + 1, values={"loss": v, "learning_rate": 1e-3, **extra})
            for i, v in enumerate(losses)]


def keras(losses: list[float]) -> str:
    """Keras 2 epoch summaries, the layout of keras-team/keras#7603 (`1562/1562 [===] - 49s - loss: 0.9050 ...`)."""
    return "".join(f"Epoch {i + 1}/800\n1562/1562 [==============================] - 49s - loss: {v:.4f} - "
                   f"acc: 0.6827 - val_loss: 0.7667 - val_acc: 0.7323\n" for i, v in enumerate(losses))


# -- a step up to a new level ------------------------------------------------------------------------------------

def test_a_loss_that_steps_up_to_a_higher_level_and_stays_is_divergence(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two epochs near 0.9, then three at 1.5 and above: too few for a trend test to reach significance, but every
    log since the jump is a third above every log before it."""
    items = doctor(keras([0.9050, 0.8906, 1.5519, 1.5416, 1.8483]), tmp_path, capsys)
    assert items[0]["id"] == "loss_diverging", items
    assert "a third above every log before it" in json.dumps(items[0])


@pytest.mark.parametrize("losses", [
    [0.9050, 0.8906, 1.5519, 0.8840, 0.8810],  # one wild epoch, then back: no new level
    [0.9050, 0.8906, 1.5519, 1.5416],  # only two logs since the jump: not yet a level
    [1.2, 1.15, 1.1, 1.08, 4.3, 4.28, 4.25, 4.22],  # a steady 4x level: a loss summed over accumulation
    [2.4, 2.1, 1.9, 1.7, 1.6, 1.55, 1.5, 1.48],  # a healthy descent
])
def test_no_step_up_without_a_new_level(losses: list[float]) -> None:
    assert [i.id for i in Advisor(None).feed_all(logs(losses)).items()] == []


def test_a_step_up_while_the_learning_rate_warms_up_is_not_divergence() -> None:
    losses = [0.9, 0.89, 1.5, 1.55, 1.6]
    warming = [events.Log(t=float(i), step=i + 1, values={"loss": v, "learning_rate": 1e-5 * (i + 1)})
               for i, v in enumerate(losses)]
    assert Advisor(None).feed_all(warming).items() == []


# -- a loss at chance ----------------------------------------------------------------------------------------

R2C = """TRAIN EPOCH  {epoch}:
loss             {loss}
crl              0.089470
accuracy         0.249471
dtype: float64

"""
"""AllenNLP/pandas epoch summaries, the layout of rowanz/r2c#43."""


def test_a_loss_at_ln_k_for_several_logs_is_chance_level(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ln 4 = 1.38629 to six digits in every epoch (four answers to choose from): the model guesses uniformly."""
    text = "".join(R2C.format(epoch=i, loss=v) for i, v in enumerate([1.356284, 1.386393, 1.386381, 1.386379,
                                                                       1.386312]))
    items = doctor(text, tmp_path, capsys)
    assert items[0]["id"] == "loss_flat" and "ln 4" in items[0]["title"], items


@pytest.mark.parametrize("losses", [
    [2.41, 2.3031, 2.2712, 2.1405, 2.0121, 1.9433],  # a 10-class run passing through ln 10 once
    [1.3863, 1.3861, 1.3864, 1.2],  # three at ln 4, then learning
    [1.3863, 0.6931, 1.3863, 0.6931],  # chance of different k, alternating: not one level
    [1.39, 1.39, 1.39, 1.39],  # two decimals cannot tell ln 4 from its neighbours
])
def test_no_chance_level_without_four_logs_at_one_ln_k(losses: list[float]) -> None:
    assert [i.id for i in Advisor(None).feed_all(logs(losses)).items()] == []


# -- a zero training loss beside a NaN eval loss -------------------------------------------------------------

def test_a_zero_training_loss_with_a_nan_eval_loss_is_the_zero(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """shibing624/MedicalGPT#252's shape: 'loss': 0.0 from the first log, eval_loss nan. No label token is scored
    in either (a mean over none is 0/0 in eval): the zero is what to fix, not a NaN to chase."""
    train = "{'loss': 0.0, 'learning_rate': 1.0533245556287031e-07, 'epoch': 0.01}\n"
    evaluation = ("{'eval_loss': nan, 'eval_runtime': 2365.9772, 'eval_samples_per_second': 21.4, "
                  "'eval_steps_per_second': 5.35, 'epoch': 0.01}\n")
    items = doctor(train + evaluation + train * 5, tmp_path, capsys)
    assert [i["id"] for i in items] == ["loss_zero"], items


def test_a_nan_eval_loss_after_a_real_training_loss_is_still_nan(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    train = "{'loss': 1.2345, 'learning_rate': 2e-05, 'epoch': 0.01}\n"
    evaluation = "{'eval_loss': nan, 'eval_runtime': 12.5, 'epoch': 0.01}\n"
    items = doctor(train + evaluation, tmp_path, capsys)
    assert items[0]["id"] == "nan_loss", items


# -- a rise in words -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    'In the training process, "loss exploded" threw out and the training is stopped.\n',  # barronalex/Tacotron#7
    "Why does the value of loss suddenly increase and explode when training 14,000 times or so?\n",
    "在Wider数据集训练中也出现了loss爆炸，请问你是如何避免loss爆炸并且训练的呢？\n",  # lxg2015/faceboxes#5
    "为什么会有训练到一半突然loss增大的问题。\n",
    "After 3 epochs the training loss started to diverge.\n",
    # swz30/MPRNet#29: numbers only, the last far above the lowest before it
    "the loss was about 100 in the first epoch and dropped to 70 in the 69th epoch, but it suddenly became "
    "800,000 in the 70th epoch!\n",
    "After 1000 steps the loss was 2.1; now it is 3.4.\n".replace(";", ","),
    "After the first epoch the loss keeps getting bigger.\n",
    "训练到第二个epoch，loss越来越大。\n",
    "学习率调小以后loss不降反升。\n",
    # mozilla/DeepSpeech#258: a bound kept, then a value a quarter above it (a fifth is enough in words)
    "After this checkpoint/restore the loss never dipped below 88 and it's currently with loss 112 at epoch 58.\n",
    "Since the resume the loss has stayed above 1.9 and it is now at 2.4.\n",
])
def test_a_loss_said_to_rise_or_explode_is_divergence(text: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor(text, tmp_path, capsys)
    assert items[0]["id"] == "loss_diverging" and "own words" in items[0]["title"], items


def test_a_validation_loss_said_to_rise_while_training_falls_is_overfitting(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Reported as overfitting (loss_diverging's id, its own advice), no longer quiet: threads settle it as a fault."""
    items = doctor("val_loss increased from 0.41 to 0.52 while the train loss keeps falling\n", tmp_path, capsys)
    assert items[0]["id"] == "loss_diverging" and "overfitting" in items[0]["title"], items


@pytest.mark.parametrize("text", [
    "The loss does not explode any more after lowering the learning rate.\n",
    "How do I avoid the loss exploding?\n",
    "The loss decreases while the learning rate increases during warm-up.\n",
    "[deepspeed] OVERFLOW! Skipping step. Attempted loss scale: 65536, increasing loss scale to 131072\n",
    "    loss = loss_fn(out, labels)  # loss explodes without clipping\n",
    "loss没有爆炸，训练正常。\n",
    "the loss went from 2.3 to 1.1 after 3 epochs\n",
    "loss was 1.2 with batch size from 8 to 32\n",
    "the loss is 2.5 at step 10 and 1.2 at step 500, and the learning rate went from 2e-5 to 2e-4\n",
    "val loss was 0.3 at epoch 1 and 0.9 at epoch 9\n",
    "the loss was 2.31 at step 100 and is 2.35 now\n",  # a wiggle, not a fifth
    "the loss stayed below 1.5 for under 3 hours of training\n",  # a time is not a loss
    "the loss never went above 0.9 and is now 0.4\n",
    "The loss is higher with LoRA than with a full fine-tune, as expected.\n",
])
def test_words_that_deny_a_rise_or_name_another_quantity_are_quiet(text: str, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert [i["id"] for i in doctor(text, tmp_path, capsys)] == []


def test_a_rise_in_words_that_ends_in_nan_is_divergence_first(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """guillaumegenthial/sequence_tagging#47's shape: the user says the loss falls then rises, the log ends in nan."""
    text = ("with lr = 0.01 the train loss decrease first and then increase. What is wrong?\n"
            "INFO: train loss:1.10886\nINFO: train loss:0.866067\nINFO: train loss:1.20029\nINFO: train loss:nan\n")
    items = doctor(text, tmp_path, capsys)
    assert [i["id"] for i in items] == ["loss_diverging"] and items[0]["severity"] == "error", items
    assert "became nan" in json.dumps(items[0])


def test_a_rise_only_supposed_in_words_leaves_the_nan_first(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """fairseq's floor message supposes the explosion; the fp16 floor is the finding (and `if` is no report)."""
    text = ("FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding. Try lowering "
            "the learning rate, using gradient clipping or increasing the batch size.\n"
            "If the loss explodes, lower the learning rate.\n")
    items = doctor(text, tmp_path, capsys)
    assert [i["id"] for i in items] == ["nan_loss"], items


# -- a rise over a handful of logs ---------------------------------------------------------------------------

LLAVA = """{'loss': 1.112, 'learning_rate': 0.00019949993043107128, 'epoch': 0.06}
{'loss': 0.9816, 'learning_rate': 0.00019949672241561115, 'epoch': 0.06}
{'loss': 1.1023, 'learning_rate': 0.0001994935041690517, 'epoch': 0.06}
{'loss': 1.1331, 'learning_rate': 0.00019949027569172385, 'epoch': 0.06}
{'loss': 1.1322, 'learning_rate': 0.00019948703698395963, 'epoch': 0.06}
{'loss': 1.3218, 'learning_rate': 0.00019948378804609203, 'epoch': 0.06}
"""
"""Six dicts as pasted in haotian-liu/LLaVA#878 (the reporter saw the loss converge, then climb)."""


def test_a_loss_rising_by_a_third_over_six_logs_is_divergence(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """LLaVA#878's shape with the climb in orderly steps (0.98 -> 1.32 a log at a time): beyond the noise."""
    steady = LLAVA.replace("1.1023", "1.0123").replace("1.1331", "1.1031").replace("1.1322", "1.1822")
    items = doctor(steady, tmp_path, capsys)
    assert items[0]["id"] == "loss_diverging" and "rising" in items[0]["title"], items


def test_six_logs_whose_rise_is_within_their_noise_are_no_divergence(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """LLaVA#878's own six logs: the last one third above the lowest, but the same six values shuffled rise as far
    one time in twelve (permutation p about 0.08): from these numbers alone a rise cannot be told from noise, and
    noisy healthy windows read as divergence were the worse error (see the seeded tests below)."""
    from loratui.logic import series

    losses = [1.112, 0.9816, 1.1023, 1.1331, 1.1322, 1.3218]
    assert 0.05 < series.rise_p(losses) < 0.15
    assert [i["id"] for i in doctor(LLAVA, tmp_path, capsys)] == []


@pytest.mark.parametrize("losses", [
    [1.0, 0.7, 1.0, 1.05, 1.1, 1.1],  # one low log the others never came near: a dip, not a level
    [1.2, 1.1, 1.05, 0.98, 1.02, 1.31],  # the lowest comes late: one high log after it is no trend
    [1.112, 0.9816, 1.1023, 1.1331, 1.1322, 1.2218],  # up a quarter, not a third
])
def test_no_short_rise_without_a_trend_from_a_level(losses: list[float]) -> None:
    assert [i.id for i in Advisor(None).feed_all(logs(losses)).items()] == []


def noisy_windows(noise: float, shortest: int, longest: int, n: int = 1000) -> int:
    """How many of `n` seeded windows of `shortest`-`longest` logs scattered `noise` around one level are read as
    divergence."""
    import random

    rng = random.Random(11)
    flagged = 0
    for _ in range(n):
        window = [1.0 + rng.gauss(0, noise) for _ in range(rng.randint(shortest, longest))]
        flagged += "loss_diverging" in Advisor(None).feed_all(logs(window)).found
    return flagged


def test_short_noisy_flat_windows_raise_no_rise() -> None:
    """1000 seeded windows of 5 to 15 logs scattered 5% around one level: none is read as a rise or a step."""
    assert noisy_windows(0.05, 5, 15) == 0


@pytest.mark.parametrize(("noise", "shortest", "longest", "most"), [
    (0.10, 5, 15, 15),  # measured 11 per 1000 (73 before the permutation test)
    (0.10, 16, 64, 25),  # measured 18 (133 before)
    (0.20, 5, 15, 45),  # measured 42 (34 before the climb back past the start, 228 before the permutation test)
])
def test_noisy_healthy_windows_are_rarely_called_divergence(noise: float, shortest: int, longest: int,
                                                            most: int) -> None:
    """Per-step losses scatter 10-20%: a third above the lowest of a few such logs happens by chance, so a rise
    must also pass a permutation test (`series.rise_p`) or double; the figures are per 1000 seeded windows."""
    assert noisy_windows(noise, shortest, longest) <= most


# -- a creep after a grad-norm spike, with a log that dips -----------------------------------------------------

def grad_logs(losses: list[float], grads: list[float]) -> list[events.Log]:
    return [events.Log(t=float(i), step=i + 1, values={"loss": v, "grad_norm": g, "learning_rate": 2e-4})
            for i, (v, g) in enumerate(zip(losses, grads))]


GRADS = [0.41, 0.38, 0.44, 0.4, 9.7, 0.5, 0.45, 0.42, 0.4, 0.41, 0.43]  # one spike, then back to normal


def test_a_creep_after_a_grad_norm_spike_survives_one_log_that_dips() -> None:
    losses = [1.31, 1.28, 1.27, 1.26, 1.33, 1.38, 1.36, 1.46, 1.5, 1.52, 1.55]
    found = Advisor(None).feed_all(grad_logs(losses, GRADS)).found["loss_diverging"]
    assert found.facts["kind"] == "creep" and found.step == 9


@pytest.mark.parametrize("losses", [
    [1.31, 1.28, 1.27, 1.26, 1.30, 1.25, 1.29, 1.27, 1.24, 1.28, 1.26],  # the spike passes, the loss goes on
    [1.31, 1.28, 1.27, 1.26, 1.33, 1.30, 1.36, 1.32, 1.35, 1.33, 1.34],  # a few percent up, and level
])
def test_a_grad_norm_spike_without_a_creep_is_quiet(losses: list[float]) -> None:
    assert "loss_diverging" not in Advisor(None).feed_all(grad_logs(losses, GRADS)).found


def test_a_loss_at_chance_while_the_learning_rate_warms_up_is_where_it_starts() -> None:
    """A reward model's pairwise loss starts at ln 2; during warm-up four logs there are no finding."""
    warming = [events.Log(t=float(i), step=i + 1, values={"loss": v, "learning_rate": 1e-6 * (i + 1)})
               for i, v in enumerate([0.6932, 0.6931, 0.6931, 0.6932, 0.6902, 0.6511])]
    assert Advisor(None).feed_all(warming).items() == []


# -- a bare `step loss` column ----------------------------------------------------------------------------------

def test_a_bare_step_and_loss_column_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """prajdabre/yanmtt#7 prints `76930 2.6496577` a line, no names: three in a row with rising steps are the loss
    column, and its nan is a NaN loss."""
    text = ("...\n76930 2.6496577\n76940 2.59109\n76950 2.596339\n76960 2.735384\n76970 2.6265104\n76980 nan\n"
            "76990 nan\nSaving the model\n77000 nan\n")
    items = doctor(text, tmp_path, capsys)
    assert items[0]["id"] == "nan_loss" and "76980" in items[0]["title"], items


@pytest.mark.parametrize("text", [
    "12 0.5\n13 0.7\n",  # two lines: any two numbers
    "10 0.5\nwarming up\n20 0.4\nnext\n30 nan\n",  # not in a row
    "30 0.5\n20 0.4\n10 nan\n",  # steps that do not rise
    "10 5\n20 7\n30 9\n",  # counts, no decimal point
])
def test_stray_number_pairs_are_no_loss_column(text: str) -> None:
    from loratui.logic.text_reader import TextReader

    reader = TextReader()
    found = [e for line in text.splitlines(keepends=True) for e in reader.feed(line)] + reader.close()
    assert [e for e in found if isinstance(e, events.Log)] == []
