"""Loss health read from what the numbers mean (issue 23): a Megatron line that prints no loss, and (below) the
trend, spike and flat tests measured on seeded noise. Real lines name their source; the others are built from
the pattern with other models and numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loratui.cli import main
from loratui.logic.text_reader import values


def doctor(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    path = tmp_path / "pasted.txt"
    path.write_text(text, encoding="utf-8")
    main(["doctor", str(path), "--json", "--no-guess"])  # the rules alone: the word guess is tests/test_word_guess.py
    return json.loads(capsys.readouterr().out)


# -- Megatron prints a loss only when its average is above 0 ----------------------------------------------------

MEGATRON_NAN = (
    " iteration        9/      10 | consumed samples:          108 | consumed tokens:       442368 | elapsed time per "
    "iteration (ms): 1979.2 | learning rate: 4.219E-07 | global batch size:    12 | loss scale: 1.0 | actual seqlen:  "
    "4096 | number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: 6.063 | tokens "
    "per gpu per second (tgs): 2069.506 | TFLOPs: 127.00 |\n")
"""deepspeedai/Megatron-DeepSpeed#434: the NaN's only sign was the missing `lm loss`."""


def megatron(step: int, loss: str | None, skipped: int = 0, lr: str = "1.500E-04") -> str:
    shown = f" lm loss: {loss} |" if loss is not None else ""
    return (f" iteration {step:8d}/  500000 | consumed samples: {step * 512:12d} | elapsed time per iteration (ms): "
            f"1234.5 | learning rate: {lr} | global batch size:   512 |{shown} loss scale: 65536.0 | grad norm: 2.345 "
            f"| number of skipped iterations: {skipped:3d} | number of nan iterations:   0 |\n")


def test_a_megatron_line_without_its_loss_is_a_nan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor(MEGATRON_NAN, tmp_path, capsys)
    assert items[0]["id"] == "nan_loss" and "step 9" in items[0]["title"], items
    assert "Megatron" in json.dumps(items[0]) and "not the learning rate" in items[0]["title"], items


def test_megatron_losses_are_read_and_a_later_missing_one_is_the_nan(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    text = "".join(megatron(s, f"{v:.6E}") for s, v in ((100, 7.12), (200, 6.4), (300, 5.9))) + megatron(400, None)
    assert values.loss_line(megatron(200, "6.400000E+00")) == (200, {"learning_rate": 1.5e-4, "grad_norm": 2.345,
                                                                     "loss": 6.4})
    items = doctor(text, tmp_path, capsys)
    assert items[0]["id"] == "nan_loss" and "step 400" in items[0]["title"], items


@pytest.mark.parametrize("text", [
    "".join(megatron(s, f"{v:.6E}") for s, v in ((100, 7.12), (200, 6.4), (300, 5.9), (400, 5.5))),
    megatron(100, "7.1E+00") + megatron(200, None, skipped=100),  # every step skipped: fp16 overflow, not this rule
])
def test_megatron_lines_with_their_loss_are_quiet(text: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert [i["id"] for i in doctor(text, tmp_path, capsys)] == []


# -- the permutation test behind a rise -----------------------------------------------------------------------

def test_the_rise_permutation_p_is_calibrated_on_noise() -> None:
    """Under pure noise (any distribution: here Gaussian and a heavy-tailed one) p <= 0.05 about 5% of the time, and
    the same 20 logs sorted rising are far beyond it."""
    import random

    from loratui.logic import series

    rng = random.Random(4)
    for draw in (lambda: rng.gauss(1.0, 0.1), lambda: 1.0 + 0.05 * rng.paretovariate(2.5)):
        small = sum(series.rise_p([draw() for _ in range(rng.randint(6, 40))]) <= 0.05 for _ in range(400))
        assert 6 <= small <= 40, small  # 20 expected; binomial 400 x 0.05 stays within these bounds
    ordered = sorted(rng.gauss(1.0, 0.1) for _ in range(20))
    assert series.rise_p(ordered) <= 0.005


def test_a_v_of_orderly_steps_is_beyond_noise_and_its_shuffles_are_not() -> None:
    from loratui.logic import series

    v = [2.0, 1.8, 1.6, 1.5, 1.7, 1.9, 2.1]
    assert series.rise_p(v) <= 0.01
    assert series.rise_p([1.7, 2.0, 1.5, 2.1, 1.6, 1.9, 1.8]) > 0.2


# -- a loss said to stay put, or to be zero -------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "按照教程执行操作，程序运行起来后loss一直是2.98，请问这是什么问题？\n",  # zjunlp/PromptKG#13
    "The problem is that loss since 2nd epoch becomes huge and unchanged\n",  # xingyizhou/CenterNet#928
    "- MTP loss starts at ~8.8 and **plateaus at ~4.0** regardless of training duration\n",  # modelscope/ms-swift#8192
    "My training loss is stuck at 3.1 after 2000 steps.\n",
    "The loss does not decrease at all, whatever learning rate I try.\n",
    "训练了5个epoch，loss不下降。\n",
    "loss始终为0.6931，准确率50%\n",
    "The train loss stays the same from epoch 1 on.\n",
])
def test_a_loss_said_to_stay_put_is_flat(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor(text, tmp_path, capsys)
    assert items[0]["id"] == "loss_flat" and "own words" in items[0]["title"], items


@pytest.mark.parametrize("text", [
    "While debugging why some users got 0 loss when fine-tuning Llama-2 on Guanaco, it seems the issue was caused by "
    "padding tokens being appended on the left.\n",  # huggingface/trl#550
    "After the first epoch the training loss becomes 0 and stays there.\n",
    "训练时loss一直为0\n",
])
def test_a_loss_said_to_be_zero_is_zero(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor(text, tmp_path, capsys)
    assert items[0]["id"] == "loss_zero" and "own words" in items[0]["title"], items


@pytest.mark.parametrize("text", [
    "If the loss does not decrease, lower the learning rate.\n",  # a supposition, not a report
    "The val loss stays at 0.5 while the train loss falls.\n",  # validation: overfitting is another story
    "The loss decreases nicely but the learning rate stays at 0 during warm-up.\n",  # another quantity
    "loss scale stuck at 1 after 200 overflows\n",  # fp16's loss scale, not the loss
    "The loss went from 2.3 to 0.4 in 3 epochs.\n",
    "Loss: 0.0312\n",
    "    if loss == 0: continue  # the loss is zero for padding-only batches\n",  # code
    "A loss of 0.5 is fine for this task.\n",
])
def test_words_that_report_no_flat_or_zero_loss_are_quiet(text: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert [i["id"] for i in doctor(text, tmp_path, capsys) if i["id"] in ("loss_flat", "loss_zero")] == []


@pytest.mark.parametrize("text", [
    # MIC-DKFZ/nnUNet#2790: the rise as a noun
    "While training the Primus model, I observed a sharp increase in both training loss and validation loss between "
    "epochs 30 and 100.\n",
    "After resuming there was a sudden spike in the training loss that never came back down.\n",
])
def test_a_rise_said_as_a_noun_is_divergence(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor(text, tmp_path, capsys)
    assert items[0]["id"] == "loss_diverging" and "own words" in items[0]["title"], items


@pytest.mark.parametrize("text", [
    "I saw a sharp increase in validation loss after epoch 3.\n",  # validation loss: overfitting
    "An increase in loss scale after 2000 clean steps is normal.\n",  # fp16's scaler
    "How do I avoid an increase in the training loss when resuming?\n",
])
def test_a_noun_rise_of_another_loss_or_supposed_is_quiet(text: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert [i["id"] for i in doctor(text, tmp_path, capsys)] == []


@pytest.mark.parametrize("text", [
    # open-mmlab/mmdetection#1710
    "But when I train the source code, I set lr=0.12 for 48 GPUs * 2 img/gpu and my loss get nan. I reduce my lr to "
    "0.08 and 0.06, my loss still get nan.\n",
    "After 300 steps the loss goes nan and training stops.\n",
    "训练到第3个epoch时loss变成nan\n",
    "用fp16训练，损失为inf\n",
])
def test_a_nan_said_with_other_verbs_is_nan(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor(text, tmp_path, capsys)
    assert items[0]["id"] == "nan_loss", items


MUSUBI = ("steps: 100%|████████████████████████████████████████| 3300/3300 [2:41:46<00:00,  2.94s/it, avr_loss=nan]\n"
          "saving checkpoint: D:/Msubi/musubi-tuner/Output/test.safetensors\n")
"""kohya-ss/musubi-tuner#26: the run's only loss is the bar's `avr_loss`."""


def test_an_averaged_loss_in_a_bar_is_the_loss(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor(MUSUBI, tmp_path, capsys)
    assert items[0]["id"] == "nan_loss" and "step 3300" in items[0]["title"], items
    assert values.loss_line("epoch 3 | avg_loss: 0.8123 | lr: 1e-4") == (None, {"loss": 0.8123, "learning_rate": 1e-4})
    assert values.loss_line("running_loss=2.5311") == (None, {"loss": 2.5311})


def test_a_validation_average_loss_is_not_the_training_loss() -> None:
    assert values.loss_line("val_avg_loss=nan") is None


# -- mixed precision's loss scaler overflows at the start on purpose --------------------------------------------

def mmocr(step: int, loss: str, grad: str) -> str:
    return (f"2021-11-22 01:32:34,502 - mmocr - INFO - Epoch [1][{step}/62598]\tlr: 1.000e-03, eta: 7 days, 15:55:58, "
            f"time: 0.705, data_time: 0.002, memory: 7239, loss_ce: 0.5921, loss: {loss}, grad_norm: {grad}\n")


def test_a_grad_norm_nan_at_the_start_that_the_next_logs_recover_from_is_the_loss_scaler(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """JiaquanYe/TableMASTER-mmocr#32: grad_norm nan at the first log, 3.98 at the next, the loss falling."""
    text = (" Epoch [1][100/62598]\tlr: 1.000e-03, eta: 6 days, 15:22:46, time: 0.539, data_time: 0.051, memory: 7239, "
            "loss_ce: 1.2757, horizon_bbox_loss: 0.2828, vertical_bbox_loss: 0.3507, loss: 1.9091, grad_norm: nan\n"
            + mmocr(200, "0.9186", "3.9772"))
    assert doctor(text, tmp_path, capsys) == []


@pytest.mark.parametrize("lines", [
    [("1.9091", "nan"), ("0.9186", "nan"), ("0.9011", "nan"), ("0.8890", "nan")],  # never recovers
    [("1.9091", "3.1"), ("0.9186", "2.9"), ("0.9011", "nan"), ("0.8890", "4.2")],  # a NaN mid-run, after finite ones
    [("nan", "nan"), ("0.9186", "3.9772")],  # the loss itself NaN
    [("1.9091", "nan")],  # one log, nothing after it: a NaN is what the text shows
])
def test_a_grad_norm_nan_that_is_not_the_scalers_start_stays(lines: list[tuple[str, str]], tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    text = "".join(mmocr(100 * (i + 1), loss, grad) for i, (loss, grad) in enumerate(lines))
    assert doctor(text, tmp_path, capsys)[0]["id"] == "nan_loss"


# -- flat at a non-zero value over a few hundred steps ----------------------------------------------------------

MONA = "".join(
    f"2025-04-26 02:06:00,311 - mmdet - INFO - Epoch [3][{step}/12414]\tlr: 1.000e-04, eta: 1:18:47, time: 0.345, "
    f"data_time: 0.004, memory: 5922, loss_cls: 1.1634, loss_bbox: 0.6459, loss: {loss}\n"
    for step, loss in ((10800, 1.8092), (10850, 1.8134), (10900, 1.8302), (10950, 1.8199), (11000, 1.8253),
                       (11050, 1.8222), (11100, 1.8162)))
"""Leiyi-HU/mona#11: seven logs over 300 iterations within 1.2% of 1.82, no trend."""


def test_seven_logs_flat_over_hundreds_of_steps_are_flat(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor(MONA, tmp_path, capsys)
    assert items[0]["id"] == "loss_flat", items


def test_six_steady_logs_of_another_run_are_flat_and_a_slow_descent_is_not() -> None:
    from loratui import events
    from loratui.logic.advisor import Advisor

    def run(losses: list[float]) -> list[str]:
        return list(Advisor(None).feed_all([events.Log(t=float(i), step=200 + 25 * i, values={"loss": v})
                                            for i, v in enumerate(losses)]).found)

    assert run([3.412, 3.398, 3.421, 3.405, 3.417, 3.409]) == ["loss_flat"]
    assert run([3.412, 3.398, 3.371, 3.355, 3.342, 3.320]) == []  # 3% down, a trend every log: learning
    assert run([3.412, 3.398, 3.421, 3.405, 3.417]) == []  # five logs: too few to call


def test_seeded_healthy_descents_are_rarely_flat_or_diverging() -> None:
    """1000 seeded windows of 5-15 logs, 10 steps apart, descending 5-30% with 3% or 10% noise: measured 2 flat at
    3% and 4 diverging at 10% per 1000."""
    import random

    from loratui import events
    from loratui.logic.advisor import Advisor

    for noise, flat_most, rise_most in ((0.03, 5, 3), (0.10, 3, 10)):
        rng = random.Random(11)
        flat = rise = 0
        for _ in range(1000):
            k, drop = rng.randint(5, 15), rng.uniform(0.05, 0.3)
            window = [1.0 + drop * (1 - i / (k - 1)) + rng.gauss(0, noise) for i in range(k)]
            found = Advisor(None).feed_all([events.Log(t=float(i), step=(i + 1) * 10, values={
                "loss": v, "learning_rate": 1e-3}) for i, v in enumerate(window)]).found
            flat, rise = flat + ("loss_flat" in found), rise + ("loss_diverging" in found)
        assert flat <= flat_most and rise <= rise_most, (noise, flat, rise)


# -- epoch summaries that do not move ---------------------------------------------------------------------------

def epochs(losses: list[str], total: int = 10000) -> str:
    """A per-epoch tqdm bar as a pasted log keeps it, its last redraw only (the layout of maxjcohen/transformer#27)."""
    return "".join(f"[Epoch {i + 1:3d}/15]: 100%|██████████| {total}/{total} [00:32<00:00, 306.73it/s, loss={v}, "
                   f"val_loss={v}]\n" for i, v in enumerate(losses))


def test_finished_epoch_bars_are_read_as_successive_epochs() -> None:
    from loratui import events
    from loratui.logic.text_reader import TextReader

    reader = TextReader()
    found = [e for line in epochs(["80.6", "80.5", "80.5"]).splitlines(keepends=True) for e in reader.feed(line)]
    found += reader.close()
    assert [(e.step, e.values["loss"]) for e in found if isinstance(e, events.Log)] == [
        (10000, 80.6), (20000, 80.5), (30000, 80.5)]


def test_epoch_summaries_that_do_not_move_are_flat(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """maxjcohen/transformer#27: 80.6, 80.5, 80.5 over three epochs of 10000 steps."""
    items = doctor(epochs(["80.6", "80.5", "80.5"]) + "......\n", tmp_path, capsys)
    assert items[0]["id"] == "loss_flat", items
    items = doctor(epochs(["2.3026", "2.3019", "2.3031"], total=782), tmp_path, capsys)  # another run, CIFAR-10's ln 10
    assert items[0]["id"] == "loss_flat", items


@pytest.mark.parametrize("text", [
    epochs(["80.6", "79.1", "77.9"]),  # 3% in two epochs: learning
    epochs(["1.0", "1.0", "1.0"]),  # printed to 2 digits: 0.5% cannot show
    epochs(["2.3026", "2.3019", "2.3031"], total=300),  # 900 steps: not yet whole epochs apart
])
def test_epoch_summaries_that_move_or_cannot_show_it_are_quiet(text: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert [i["id"] for i in doctor(text, tmp_path, capsys)] == []


# -- a change of level late in the window ---------------------------------------------------------------------

def run_found(losses: list[float]) -> dict[str, Any]:
    from loratui import events
    from loratui.logic.advisor import Advisor

    return Advisor(None).feed_all([events.Log(t=float(i), step=(i + 1) * 10, values={
        "loss": v, "learning_rate": 1e-4}) for i, v in enumerate(losses)]).found


def test_a_level_that_ramps_up_late_in_a_level_window_is_divergence(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Twelve logs around 1.52, then five climbing to 2.2, each rise test passing its permutation test."""
    losses = [1.52, 1.49, 1.55, 1.50, 1.53, 1.47, 1.54, 1.51, 1.50, 1.56, 1.48, 1.52, 1.71, 1.86, 1.98, 2.12, 2.21]
    found = run_found(losses)["loss_diverging"]
    assert found.facts["p"] <= 0.01
    text = "".join(f"{{'loss': {v}, 'learning_rate': 0.0001, 'epoch': {i / 100:.2f}}}\n" for i, v in enumerate(losses))
    items = doctor(text, tmp_path, capsys)
    assert items[0]["id"] == "loss_diverging" and "shuffled" in json.dumps(items[0]), items


def test_late_rises_of_half_the_level_are_mostly_found_and_noise_is_not() -> None:
    """100 seeded windows: 5-40 logs at one level with 5% noise, then 5 logs climbing to 1.5x: measured 90 found
    (57 without the change-of-level test); the same windows without the climb: none."""
    import random

    rng = random.Random(5)
    found = quiet = 0
    for _ in range(100):
        k = rng.randint(5, 40)
        level = [1 + rng.gauss(0, 0.05) for _ in range(k)]
        climb = [1 + 0.5 * i / 5 + rng.gauss(0, 0.05) for i in range(1, 6)]
        found += "loss_diverging" in run_found(level + climb)
        quiet += "loss_diverging" not in run_found(level + [1 + rng.gauss(0, 0.05) for _ in range(5)])
    assert found >= 80 and quiet == 100, (found, quiet)


# -- sizes no healthy run reaches --------------------------------------------------------------------------------

GARPN = ("2021-01-03 10:02:15,629 - mmdet - INFO - Epoch [1][500/58633]   lr: 1.996e-02, eta: 3 days, 18:12:13, time: "
         "0.434, data_time: 0.005, memory: 4851, loss_rpn_cls: 2.5725, loss_rpn_bbox: 0.0047, loss_anchor_shape: "
         "0.3861, loss_anchor_loc: 55.1215, loss_cls: 2326544033.5461, acc: 84.1525, loss_bbox: 135189261.4936, loss: "
         "2461733416.8998, grad_norm: 1170372919273.4768\n")
"""open-mmlab/mmdetection#4383: one line, 500 iterations in."""


@pytest.mark.parametrize("text", [
    GARPN,
    "{'loss': 3.2e8, 'learning_rate': 0.001, 'epoch': 0.4}\n",
    "step 120 | loss: 7.912 | grad_norm: 4.3e+07 | lr: 3e-4\n",
])
def test_a_loss_or_grad_norm_no_healthy_run_reaches_is_divergence(text: str, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor(text, tmp_path, capsys)
    assert items[0]["id"] == "loss_diverging" and items[0]["severity"] == "error", items
    assert "blew up" in json.dumps(items[0])


@pytest.mark.parametrize("text", [
    "{'loss': 48213.7, 'grad_norm': 812.4, 'learning_rate': 0.001, 'epoch': 0.4}\n",  # a summed loss, big but sane
    "step 120 | loss: 7.912 | grad_norm: 412.9 | lr: 3e-4\n",  # a large but ordinary grad norm
])
def test_large_but_ordinary_sizes_are_quiet(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert [i["id"] for i in doctor(text, tmp_path, capsys)] == []


@pytest.mark.parametrize("text", [
    # keras-team/keras#4066
    "it sometimes locks into a situation where it only predicts a single class and accuracy fixes at 0.1 .\n",
    "After two epochs the network always outputs the same label for every image.\n",
    "训练了10个epoch，准确率一直是0.1\n",
])
def test_a_classifier_said_to_answer_one_class_is_flat(text: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor(text, tmp_path, capsys)
    assert items[0]["id"] == "loss_flat", items


@pytest.mark.parametrize("text", [
    "If the model predicts one class, check the labels.\n",
    "Each head predicts a single class token.\n",
    "We predict the same class as the teacher model.\n",
    "accuracy improves from 0.1 to 0.8 in 5 epochs\n",
    "val accuracy stays at 50% while train accuracy climbs\n",
])
def test_one_class_words_that_report_nothing_stuck_are_quiet(text: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert [i["id"] for i in doctor(text, tmp_path, capsys)] == []


def test_a_grad_norm_spike_in_a_noisy_healthy_run_is_rarely_a_creep() -> None:
    """1000 seeded windows of 8-20 logs at one level with 10% noise and one grad-norm spike (3-20x) the loss does
    not follow: measured 17 read as a creep (56 before the creep had to stand 3 noise-sigmas clear)."""
    import random

    from loratui import events
    from loratui.logic.advisor import Advisor

    rng = random.Random(3)
    creeps = 0
    for _ in range(1000):
        k = rng.randint(8, 20)
        losses = [1.0 + rng.gauss(0, 0.10) for _ in range(k)]
        grads = [abs(rng.gauss(0.4, 0.05)) for _ in range(k)]
        grads[rng.randint(3, k - 4)] = rng.uniform(3, 20)
        found = Advisor(None).feed_all([events.Log(t=float(i), step=i + 1, values={
            "loss": v, "grad_norm": g, "learning_rate": 2e-4}) for i, (v, g) in enumerate(zip(losses, grads))]).found
        creeps += found.get("loss_diverging") is not None and found["loss_diverging"].facts["kind"] == "creep"
    assert creeps <= 25, creeps


@pytest.mark.parametrize("text", [
    # deepspeedai/DeepSpeedExamples#160
    "The lm-loss drop is always maintained at about 11.4 for a long time when training large gpt2 with Zero3\n",
    # huggingface/transformers#5227
    "I haven't diagnosed which of these is the main culprit of the issue I was seeing (very high loss, not going "
    "down). This fixes that issue.\n",
    "微调loss下降缓慢，4000步后还在1.0左右\n",  # hiyouga/LlamaFactory#2348
    "With the default learning rate the training loss decreases very slowly.\n",
])
def test_more_ways_of_saying_the_loss_stays_put(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor(text, tmp_path, capsys)
    assert items[0]["id"] == "loss_flat", items


def test_a_grpo_loss_said_to_rise_is_no_divergence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """aburkov/theLMbook#6: a GRPO loss grows with the KL to the reference while the reward is flat."""
    text = ('In the "GRPO from scratch" notebook, I noticed that the loss curve rapidly increases after 400 steps, '
            "while the reward remains basically unchanged.\n")
    assert [i["id"] for i in doctor(text, tmp_path, capsys)] == []
    assert doctor("In the notebook the loss curve rapidly increases after 400 steps.\n", tmp_path,
                  capsys)[0]["id"] == "loss_diverging"


def test_falls_through_wants_a_fall_that_goes_on_to_the_end() -> None:
    from loratui.logic.series import falls_through
    falling = [2.5 * 0.97 ** i + 0.02 * (i % 3) for i in range(60)]
    assert falls_through(falling)
    assert not falls_through(falling[:9])  # too few logs to tell
    assert not falls_through([max(1.9, v) for v in falling])  # fell, then stood still
    assert not falls_through(falling[:30] + falling[:30][::-1])  # fell, then rose back
    assert not falls_through([2.0 + 0.05 * (i % 4) for i in range(60)])  # flat and noisy


def still(step: int, loss: str) -> str:
    """A plain loop's log line, written for these tests (PaddleNLP's layout, made-up numbers)."""
    return f"epoch: 8 - global_step: {step}/940 - loss:{loss}"


def test_a_loss_that_stands_still_mid_run_is_flat(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Three logs 50 steps apart within 0.001 %, from step 700 (wave 19's dev half: PaddleNLP#2236): no flat-from-the-
    start judgement can see it (the paste starts mid-run), and a training loss over different batches never agrees
    that closely in a model that reads its input."""
    text = "\n".join(still(s, v) for s, v in [(700, "1535.619873"), (750, "1535.619629"), (800, "1535.633667")])
    items = doctor(text + "\n", tmp_path, capsys)
    assert items[0]["id"] == "loss_flat" and "stands still at 1535.62" in items[0]["title"]


@pytest.mark.parametrize("losses", [
    [(700, "1535.6"), (750, "1535.6"), (800, "1535.6")],  # printed too short to tell 0.01 % (a Trainer rounds to 4)
    [(700, "1.234567"), (701, "1.234571"), (702, "1.234569")],  # a running average, a step apart
    [(700, "2.345612"), (750, "2.339901"), (800, "2.351187")],  # within 0.5 %: batches that differ
])
def test_a_loss_that_only_looks_still_is_not_flat(losses: list[tuple[int, str]], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor("\n".join(still(s, v) for s, v in losses) + "\n", tmp_path, capsys)
    assert not any(item["id"] == "loss_flat" for item in items)
