"""Issue 23: a distributed run that dies at the collectives' timeout while one rank prepares the data, read from the
preparation's progress bar: the bar had run past the default half hour (1800 s) when the failure was printed after
it, in a run with several ranks. The quoted lines come from dev records (source in a comment); the others are our
own wordings (other launchers, bars, units, a Chinese thread), and negatives keep their answer."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream


def first(text: str) -> tuple[str, str]:
    items = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")[0]
    return (items[0].id, items[0].title) if items else ("", "")


FRAMES = ('  File "/data/src/train.py", line 88, in main\n'
          '    train_set = dataset.map(tokenize, batched=True, num_proc=16)\n')


@pytest.mark.parametrize("text", [
    # https://github.com/huggingface/transformers/issues/17106
    "python -m torch.distributed.launch --nproc_per_node 4 run_clm.py --do_train\n"
    "Running tokenizer on dataset:  38%|███▊      | 32066/85249 [32:12<53:25, 16.59ba/s]\n"
    "Running tokenizer on dataset:  38%|███▊      | 32068/85249 [32:13<53:59, 16.42ba/s]Traceback (most recent call "
    "last):\n",
    # https://github.com/hiyouga/LlamaFactory/issues/860: the bar's redraw cut by the traceback, which ends in the
    # barrier the other ranks waited at
    "[31:13<7:10:59, 908.45 eTraceback (most recent call last):\n"
    '  File "/home/u/LLaMA-Efficient-Tuning/src/llmtuner/dsets/preprocess.py", line 176, in preprocess_dataset\n'
    '    with training_args.main_process_first(desc="dataset map pre-processing"):\n'
    '  File "/envs/llama/lib/python3.10/site-packages/transformers/training_args.py", line 2035, in main_process_first\n'
    "    dist.barrier()\n",
    "torchrun --nproc_per_node 8 sft.py\n"
    "Map (num_proc=16):  41%|████      | 41000/100000 [35:02<50:10, 19.50 examples/s]\n"
    "Traceback (most recent call last):\n" + FRAMES,
    "deepspeed --num_gpus 4 train.py --deepspeed ds_z2.json\n"
    "Tokenizing train split: 100%|██████████| 900000/900000 [1:02:11<00:00, 241.20 examples/s]\n"
    "RuntimeError: Connection closed by peer\n",
    "多卡训练（4张A100），数据预处理跑了半个多小时后就报错了：\n"
    "Running tokenizer on dataset (num_proc=16):  52%|█████▏    | 52000/100000 [30:41<28:20, 28.24 examples/s]\n"
    "Traceback (most recent call last):\n" + FRAMES,
])
def test_a_preparation_bar_past_the_half_hour_then_a_failure_is_the_timeout(text: str) -> None:
    """Mechanism: rank 0 prepares the data alone while the other ranks wait in a collective (a barrier); the
    collectives' default timeout is 30 minutes, so a failure printed right after a preparation bar that had run that
    long, in a run with several ranks, is the others' timeout, whatever the error's own line says."""
    found, title = first(text)
    assert found == "nccl_timeout" and "preprocessing" in title


@pytest.mark.parametrize("text", [
    # the bar had run 12 minutes only
    "torchrun --nproc_per_node 8 sft.py\n"
    "Map (num_proc=16):  41%|████      | 41000/100000 [12:02<17:10, 56.80 examples/s]\n"
    "Traceback (most recent call last):\n" + FRAMES + "KeyError: 'text'\n",
    # one GPU: no rank waits on another
    "python sft.py --per_device_train_batch_size 4\n"
    "Map (num_proc=16):  41%|████      | 41000/100000 [35:02<50:10, 19.50 examples/s]\n"
    "Traceback (most recent call last):\n" + FRAMES + "KeyError: 'text'\n",
    # a training bar, not the data's preparation: the ranks meet at every step
    "torchrun --nproc_per_node 8 sft.py\n"
    " 41%|████      | 410/1000 [45:02<50:10,  6.59s/it]\n"
    "Traceback (most recent call last):\n" + FRAMES + "KeyError: 'text'\n",
])
def test_short_single_rank_or_training_bars_are_no_timeout(text: str) -> None:
    assert first(text)[0] != "nccl_timeout"
