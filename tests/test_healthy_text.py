"""Issue 23: a healthy log says so. Training logs of several tools, with the notes and warnings a working run
prints (fp16's loss scaler backing off, fairseq's OOM counter at 0, Megatron's NaN-iteration counter at 0,
TensorFlow's missing-libcudart note on a CPU machine, Unsloth's banner), give no error or warning."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream

FAIRSEQ = [
    "2021-03-01 10:00:00 | INFO | train_inner | epoch 001:    100 / 1000 loss=9.512, ppl=730.1, wps=11235, ups=3.2, "
    "wpb=3500, bsz=120, num_updates=100, lr=0.0005, gnorm=1.2, clip=0, oom=0, loss_scale=128, train_wall=30, wall=35",
    "2021-03-01 10:00:30 | INFO | train_inner | epoch 001:    200 / 1000 loss=8.301, ppl=315.2, wps=11300, ups=3.2, "
    "wpb=3500, bsz=120, num_updates=200, lr=0.0005, gnorm=1.1, clip=0, oom=0, loss_scale=128, train_wall=30, wall=65",
    "2021-03-01 10:01:00 | INFO | train_inner | epoch 001:    300 / 1000 loss=7.612, ppl=195.6, wps=11280, ups=3.2, "
    "wpb=3500, bsz=120, num_updates=300, lr=0.0005, gnorm=1.0, clip=0, oom=0, loss_scale=128, train_wall=30, wall=95",
    "| epoch 001 | loss 7.312 | ppl 158.9 | wps 11235 | ups 3.2 | wpb 3500 | bsz 120 | num_updates 1000 | lr 0.0005 | "
    "gnorm 1.2 | clip 0 | oom 0 | wall 300",
]
MEGATRON = [
    f" iteration      {i}00/  500000 | consumed samples:        {i * 12800} | elapsed time per iteration (ms): 500.0 | "
    f"learning rate: {i * 1.5:.3f}E-05 | global batch size:   128 | lm loss: {loss}E+00 | loss scale: 65536.0 | "
    "grad norm: 2.512 | number of skipped iterations:   0 | number of nan iterations:   0 |"
    for i, loss in ((1, "7.512"), (2, "6.801"), (3, "6.302"))]
KERAS_CPU = [
    "2023-01-01 10:00:00.000000: W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not load "
    "dynamic library 'libcudart.so.11.0'; dlerror: libcudart.so.11.0: cannot open shared object file: No such file "
    "or directory",
    "2023-01-01 10:00:00.000000: I tensorflow/stream_executor/cuda/cudart_stub.cc:29] Ignore above cudart dlerror if "
    "you do not have a GPU set up on your machine.",
    "Epoch 1/3",
    "1875/1875 [==============================] - 5s 2ms/step - loss: 0.2950 - accuracy: 0.9148",
    "Epoch 2/3",
    "1875/1875 [==============================] - 4s 2ms/step - loss: 0.1421 - accuracy: 0.9578",
    "Epoch 3/3",
    "1875/1875 [==============================] - 4s 2ms/step - loss: 0.1067 - accuracy: 0.9676",
]
DEEPSPEED_FP16 = [
    "[2024-05-01 10:00:05,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
    "Attempted loss scale: 65536, reducing to 32768",
    "[2024-05-01 10:00:06,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
    "Attempted loss scale: 32768, reducing to 16384",
    "{'loss': 2.1342, 'grad_norm': 1.52, 'learning_rate': 1.9e-05, 'epoch': 0.01}",
    "{'loss': 1.8721, 'grad_norm': 1.21, 'learning_rate': 1.8e-05, 'epoch': 0.02}",
    "{'loss': 1.6533, 'grad_norm': 0.98, 'learning_rate': 1.7e-05, 'epoch': 0.03}",
]


@pytest.mark.parametrize("lines", [FAIRSEQ, MEGATRON, KERAS_CPU, DEEPSPEED_FP16])
def test_a_healthy_run_has_no_error_or_warning(lines: list[str]) -> None:
    items, _ = diagnose_stream(io.BytesIO("\n".join(lines).encode("utf-8")), "pasted")
    assert [(a.id, a.severity) for a in items if a.severity in ("error", "warning")] == []


def test_an_oom_said_in_words_still_counts() -> None:
    items, _ = diagnose_stream(io.BytesIO(b"During evaluation I always get OOM on the 24 GB card"), "pasted")
    assert items and items[0].id.startswith("oom")
