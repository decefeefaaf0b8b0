"""A non-finite training signal read in any dialect (issue 23): the NaN rules had learned the corpus' phrasings.
Lines are built from the patterns (tools, layouts, casing, languages); where a real line is quoted, its source is
named. Negatives: `nan` inside names and paths, flags and settings, code, negations, precautions, fp16's occasional
overflow, objectives that are legitimately 0."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream
from loratui.logic.advisor import nan_text


def first_id(text: str) -> str:
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return items[0].id if items else ""


# -- log lines of every tool --------------------------------------------------------------------------------

@pytest.mark.parametrize("line", [
    "{'loss': nan, 'grad_norm': 1.2, 'learning_rate': 2e-05, 'epoch': 0.5}",
    '{"loss": 2.1, "grad_norm": NaN, "learning_rate": 1e-4, "epoch": 0.2}',
    "{'loss': inf, 'learning_rate': 2e-05, 'epoch': 0.5}",
    "eval_loss: nan",
    "step 120 loss=nan lr=1e-4",
    "938/938 [==============================] - 12s 13ms/step - loss: nan - accuracy: 0.0987",  # Keras
    "epoch 3 loss nan",
    "Epoch 2 | Loss: NaN | Acc: 0.10",
    "| epoch 004 | loss nan | nll_loss nan | ppl nan | wps 12000 | ups 3.2 |",  # fairseq
    " iteration      300/  10000 | lm loss: nan | grad norm: nan |",  # Megatron
    "loss = tensor(nan, device='cuda:0', grad_fn=<NllLossBackward0>)",
    "Epoch 3:  45%|████▌     | 450/1000 [01:20<01:38,  5.58it/s, loss=nan, v_num=3]",  # Lightning's bar
    "train/loss: nan",  # wandb
    "train/grad_norm: inf",
    "loss: -inf",
    "Loss: Infinity",
    "loss: nan, acc: 0.1",
    "avg_loss=nan",
    "Epoch 5 train loss: nan val loss: nan",
    "[2025-01-03 10:22:01] rank0 step=88 | loss_mlm=NaN | lr=3e-4",
    # ultralytics' epoch row: the columns are box_loss, cls_loss, dfl_loss
    "      1/100      3.35G        nan        nan        nan         29        640: 100%|██████████| 8/8 [00:02<00:00]",
    '{"train/loss": NaN, "train/grad_norm": NaN, "_step": 120, "_runtime": 3600.2}',  # wandb's summary JSON
    "{'train_runtime': 812.3, 'train_samples_per_second': 9.8, 'train_loss': nan, 'epoch': 3.0}",
    "Epoch 4: {'val_loss': nan, 'val_acc': 0.1}",
    "tensor(nan, device='cuda:0', grad_fn=<NllLossBackward0>)",  # print(loss)
    "tensor([[nan, nan, nan],\n        [nan, nan, nan]], device='cuda:0', grad_fn=<AddmmBackward0>)",  # print(out)
])
def test_a_non_finite_value_in_any_log_layout(line: str) -> None:
    assert first_id(line) == "nan_loss"


# -- the program's words and the user's -----------------------------------------------------------------------

@pytest.mark.parametrize("line", [
    "Loss is NaN, stopping training",
    "NaN loss detected at step 1200",
    "RuntimeError: Detected inf or nan values in loss",
    "ValueError: Non-finite loss encountered at step 14",
    "WARNING: non-finite loss, ending training",
    "FloatingPointError: NaN loss",
    "RuntimeError: Function 'LogSoftmaxBackward0' returned nan values in its 0th output.",
    "ValueError: Input contains NaN, infinity or a value too large for dtype('float32').",  # sklearn on the data
    "Monitored metric val_loss = nan is not finite. Previous best value was 0.500.",  # Lightning's EarlyStopping
    "train_loss was NaN/Inf",
    "Detected NaN in the gradients of layer encoder.3",
    "Warning: NaN or Inf found in input tensor.",
    "the loss becomes nan after 200 steps",
    "I am getting nan loss when training with fp16",
    "After a few epochs the loss goes to NaN.",
    "NaN after a few iterations, any idea?",
    "NaNs during training with DeepSpeed ZeRO-3",
    "inf when using fp16 on a V100",
    "the training loss turned into nan at epoch 3",
    "the losses are all NaN",
    "the loss is always nan from the first step",
    "my loss gets NaN after 10k iterations",
    "all the gradients are nan",
    "the outputs are NaN",
    "grad norm is inf",
    "I got NaNs in the loss after epoch 2",
    "If I switch to fp16 the loss is inf within a few steps",
    "Batch 312: Invalid loss, terminating training",  # Keras' TerminateOnNaN
    "ValueError: Expected parameter loc (Tensor of shape (64, 2)) of distribution Normal(loc: torch.Size([64, 2]), "
    "scale: torch.Size([64, 2])) to satisfy the constraint Real(), but found invalid values:",
    "InvalidArgumentError: Tensor had NaN values [[node CheckNumerics]]",
    "jax._src.dispatch.FloatingPointError: invalid value (nan) encountered in mul",
    # avalonstrel/GatedConvolution_pytorch#27
    "I tried many times,also made learning rate smaller,Nan of losses happened soon or later.",
    # wenet-e2e/wenet#2616: the Chinese clause runs straight into `nan`
    "使用了deepspeed stage2，fp16模式，训练了差不多1w steps后开始频繁出现loss为nan的情况。",
    "训练到第二个epoch出现nan",
    "loss变成nan了",
    "训练几百步之后损失变为inf",
    "梯度全是nan",
    # facebookresearch/maskrcnn-benchmark#841: the value quoted as Markdown code
    "when trained using 4 `gpus` the model is quite easy get `nan`. How to solve this problem?",
    "after a few hundred iterations I get **NaN** with the larger batch",
    "the loss becomes `inf` once I switch to fp16",
    # roytseng-tw/Detectron.pytorch#29: a loss named by its head, as detection models print them
    "Yet in my own script, after the first step, the loss_rcnn_bbox values are Nan, which will then crash the program.",
    "my rpn_loss is NaN after 300 iters",
    "the `loss_cls` becomes nan while loss_bbox stays finite",
    # OpenNMT/OpenNMT-py#1645 and #1796: its cross-entropy printed as `xent`; a collapse into NaN said in words
    "xent went to be nan and finally training crashed.",
    "It has successfully trained for about 5000 steps, but suddenly it collapsed with nan.",
    "the cross-entropy turned to be inf after the lr warm-up",
    "training crashed with NaN after 2 epochs",
    # meetps/pytorch-semseg#86: Markdown's italics around the logged value
    "Here comes that _Loss: nan_ all the time.",
    "the *loss* is *nan* after epoch 2",
    # Chinese: 了 after the NaN marks the change, 就/又/容易 before it the happening
    "跑了几个step就nan了",
    "训练到第3个epoch就nan了",
    "fp16下很容易nan",
    "loss不下降还出现nan",  # a negation of something else in the clause
])
def test_a_non_finite_signal_in_words(line: str) -> None:
    assert first_id(line) == "nan_loss"


@pytest.mark.parametrize("line, what, value", [
    ("eval_loss: nan", "eval_loss", "nan"),
    ("train/grad_norm: inf", "train/grad_norm", "inf"),
    ("| lm loss: nan | grad norm: nan |", "lm loss", "nan"),
    ("loss: -inf", "loss", "-inf"),
    ("the outputs are NaN", "outputs", "nan"),
    ("WARNING: non-finite loss, ending training", "loss", "non-finite"),
    ("梯度全是nan", "gradients", "nan"),
    ("tensor(nan, device='cuda:0', grad_fn=<NllLossBackward0>)", "loss", "nan"),
    ("tensor([[nan, nan, nan],", "outputs", "nan"),
    ("tf.Tensor(-inf, shape=(), dtype=float32)", "outputs", "-inf"),
    ("train loss nan", "train loss", "nan"),
    # the word before the signal in a sentence is no prefix of its key (titles read 'To output became nan')
    ("ERROR:tensorflow:Model diverged with loss = NaN.", "loss", "nan"),
    ("after a few steps, the trainer started to output nan for rewards", "output", "nan"),
    ("The loss nans immediately", "loss", "nan"),
])
def test_the_signal_and_its_value_are_named(line: str, what: str, value: str) -> None:
    assert nan_text.read(line) == nan_text.NonFinite(what, value)


@pytest.mark.parametrize("lines", [
    # apex (NVIDIA/apex's amp): halving at every step down to 1 and below
    ["Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 2.0",
     "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 1.0",
     "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 0.5"],
    ["[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 2, reducing to 1"],
    ["NOTE: gradient overflow detected, ignoring gradient, setting loss scale to: 0.25"],
    # icefall (k2-fsa/icefall#1463): its own warning, then its own exception
    ["2024-01-14 01:03:00,826 WARNING [train.py:1057] (2/4) Grad scale is small: 1.2924697071141057e-26"],
    ["RuntimeError: grad_scale is too small, exiting: 9.5e-06"],
])
def test_a_loss_scale_driven_to_its_floor(lines: list[str]) -> None:
    assert first_id("\n".join(lines)) == "nan_loss"


# -- not a NaN -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "Saving to /data/nan_experiments/run3/checkpoint-500",
    "Loaded infant dataset from /data/infra/nanodet",
    "model.nanogpt loaded",
    "python train.py --detect_anomaly --detect-nan --fp16",
    "if torch.isnan(loss): continue",
    "loss = torch.nan_to_num(loss)",
    "check whether the loss is nan before backward",
    "How to avoid nan?",
    "the loss is not nan anymore after lowering the lr",
    "the xent is not nan any more",
    "it no longer crashes with nan since I lowered the lr",
    "I call torch.nan_to_num on _all_ outputs",
    "the grad scale is small: 1024.0 but it trains",
    "max_grad_norm: inf",
    "INFO: Using anomaly detection (detect_nan=True)",
    "Training finished, loss 0.5123 nan_check=False",
    "INFO: loss_scale: 65536, inf_check disabled",
    # a best-so-far that starts at inf: Keras' ModelCheckpoint, the common PyTorch EarlyStopping recipe
    "Epoch 00001: val_loss improved from inf to 0.45123, saving model to weights.h5",
    "Epoch 1: loss improved from inf to 2.31034, saving model to ckpt",
    "Validation loss decreased (inf --> 0.693147).  Saving model ...",
    "best_val_loss: inf",
    "TrainingArguments(logging_nan_inf_filter=True, max_grad_norm=1.0)",
    "tensor([0.1234, nan_mask], device='cuda:0')",
    # Markdown's marks around names, settings and negations change nothing
    "I call `torch.nan_to_num` on the loss before backward",
    "set `max_grad_norm` to inf and the `loss_scale` to 1024",
    "the loss is not `nan` anymore after lowering the lr",
    "how to avoid `nan` in the `loss_cls`?",
    "the `nan_loss` counter stays 0",
    # Chinese negations: none appeared, no longer NaN
    "没有出现nan",
    "降低学习率之后就不会出现nan了",
    "现在没有nan了",
    "loss不再是nan了",
    "加了梯度裁剪后不再nan",
    "x = torch.tensor([float('nan'), 1.0])",
    "      1/100      3.35G      1.234     0.8123      1.102         29        640: 100%|██████████| 8/8 [00:02<00:00]",
    "| person | 120 | 300 | nan |",  # an eval table's class with no ground truth
    # a DPO run whose rewards are legitimately 0 at its start
    "{'loss': 0.6931, 'rewards/chosen': 0.0, 'rewards/rejected': 0.0, 'rewards/margins': 0.0, "
    "'learning_rate': 1e-6, 'epoch': 0.1}",
    # fp16's scaler backs off once at the start, then the run trains
    "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0\n"
    "{'loss': 2.1, 'learning_rate': 1e-4, 'epoch': 0.1}\n{'loss': 1.9, 'learning_rate': 1e-4, 'epoch': 0.2}\n"
    "{'loss': 1.8, 'learning_rate': 1e-4, 'epoch': 0.3}",
    # mixed precision's scaler skips a step whose gradients overflow; the person says the loss is fine
    "The log often shows grad_norm 3.2145 (inf) but the loss is normal. Is this a bad sign?",
    "梯度范数偶尔是inf，但loss正常",
    # or says the gradients came back (VideoMAEv2#53: the scaler's skipped steps, then trained on)
    "the parameter grad_norm appears to be inf and then nan and then back to normal, is this normal or abnormal?",
    "grad norm went inf but recovered after a few steps",
])
def test_no_nan_where_none_was_seen(text: str) -> None:
    assert first_id(text) != "nan_loss"


@pytest.mark.parametrize("line", [
    "RuntimeError: CUDA error: device-side assert triggered",
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "Epoch 3: loss 0.4213, infer time 12 ms, info: saved",
    "loss scale: 1.0 | number of skipped iterations: 0",  # Megatron under bf16 prints scale 1 on every line
    "[INFO] Infinity Fabric link is up",
    "ValueError: Invalid loss function: 'focal_v2'",
    "Epoch 10: reducing the layer-wise lr scale to 0.5",
])
def test_other_text_is_not_read_as_non_finite(line: str) -> None:
    assert nan_text.read(line) is None
    assert not nan_text.scale_floor(line)


# -- where it happened --------------------------------------------------------------------------------------------

def test_a_nan_in_a_step_line_is_dated_at_that_step() -> None:
    """The reader holds a loss line until the next, so the text read first used to date it at the step before
    (0 here, and then blamed 'non-finite from the first step'). NVIDIA-NeMo/Automodel#1883's layout."""
    text = ("step 10 | loss 2.6030 | grad_norm  9.9375\nstep 11 | loss 2.3224 | grad_norm     nan\n"
            "step 12 | loss    nan | grad_norm     nan\n")
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    assert items[0].id == "nan_loss" and items[0].title.startswith("grad_norm became nan at step 11:"), items[0]
    assert "first step" not in items[0].title


def test_a_logged_nan_keeps_the_logs_step_and_learning_rate() -> None:
    items, _ = diagnose_stream(io.BytesIO(b"step 100 loss=2.1 lr=3e-4\nstep 120 loss=nan lr=3e-4\n"), "pasted")
    assert items[0].id == "nan_loss" and "at step 120" in items[0].title and "(its last log said 0.0003)" in items[0].title, \
        items[0]


@pytest.mark.parametrize("line", [
    "The grad_norm became inf and the loss is NaN after step 300.",
    "grad norm is inf, the loss is normal at first, then the loss becomes nan",
    "the gradients are nan and the run never recovers",
])
def test_a_non_finite_gradient_with_a_loss_gone_bad_is_still_read(line: str) -> None:
    """Only a loss said to be fine excuses a non-finite gradient (the scaler's skipped step); a loss gone NaN beside
    it is a NaN run."""
    assert first_id(line) == "nan_loss"


@pytest.mark.parametrize("text", [
    # DeFRCN#8 (wave 17's dev half): detectron2's own NaN check says the training diverged
    "I met loss explosion during base_training phase, as `FloatingPointError: Predicted boxes or scores contain "
    "Inf/NaN. Training has diverged.`\n",
    "FloatingPointError: Predicted boxes or scores contain Inf/NaN. Training has diverged.\n",
])
def test_a_programs_nan_check_that_says_diverged_is_the_nan(text: str) -> None:
    """Mechanism: a check that stops the run on a non-finite value names the NaN, whatever words of divergence it
    adds; the rise those words say ran to that NaN."""
    assert first_id(text) == "nan_loss"
