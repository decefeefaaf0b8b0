"""Ways of saying a known cause that the readers missed (session 17, from wave 31's dev half, read after the wave was
scored): a loss that `gets extremely high`, the ranks' communication said to hang (`通信卡死`), a model quantized
after training (GPTQ, AWQ) as a conversion that writes it out, the shell's `Killed` as the person says it was
printed, a stall every N iterations said in Chinese, sample images generated during training and an inception score
as evaluation, two negations that cancel (`cannot ... without running into OOM`), VRAM said to surge before the
program exits, and a table a person prints of the logs (`Step  loss  grad_norm  reward_mean`, rows left out as
`...`); and from wave 32's dev half: a script run by its path that names its phase (`run scripts/run_eval_x.sh`),
the reward said not to grow (an RL objective's own measure), an RL loss said to explode or diverge, and PyTorch's
caching-allocator warning of a retried cudaMalloc (no OOM); and from wave 33's: a loss named by its set (`the loss of
the valid set goes up`), `'nan' returned`, an interrupted run's child processes that keep the GPU's memory, and
Japanese `メモリ不足`. The sentences are this file's own, none from the corpus;
each negative keeps what the reader said before. The rules alone (`--no-guess`)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_loss_words import doctor

SAID = [
    ("After the warm-up the loss started to get extremely high.\n", "loss_diverging"),
    ("the training loss gets very high after epoch 3\n", "loss_diverging"),
    ("保存checkpoint的时候多卡通信卡死了\n", "nccl_timeout"),
    ("the communication between the ranks hangs after the first save\n", "nccl_timeout"),
    ("When I quantize the 13B model with AWQ on a 24GB card I get OOM.\n", "oom_at_save"),
    ("The model quantization prompt KILLED when it reached the last layer.\n", "oom_at_save"),
    ("训练时每隔50个step就会卡顿几秒\n", "data_starved"),
    ("每经过固定的iteration后都会停顿一下\n", "data_starved"),
    ("CUDA out of memory while generating sample images in the middle of training\n", "oom_at_eval"),
    ("the GPU runs out of memory every time compute_inception_score() is called\n", "oom_at_eval"),
    ("I can't generate validation samples without running into OOM on my 3060.\n", "oom_at_eval"),
    ("每次验证时显存剧增，然后程序直接退出\n", "oom_at_eval"),
    ("I ran bash tools/run_eval_coco.sh on a 16GB card and it always ends in CUDA out of memory.\n", "oom_at_eval"),
    ("With GRPO the mean reward never increases after 300 steps.\n", "loss_flat"),
    ("PPO训练时reward一直是0\n", "loss_flat"),
    ("Training the PPO critic, the value loss explodes to 30000 within an hour.\n", "loss_diverging"),
    ("The loss of the training set keeps falling but the loss of the validation set rises.\n", "loss_diverging"),
    ("the model does not learn at all because 'nan' is returned in the first epoch\n", "nan_loss"),
    ("After I interrupted the DDP run its child processes stayed alive, so the next run ran out of memory.\n",
     "oom_other_process"),
    ("前回の学習の子プロセスが残っていて、GPUメモリ不足で落ちる\n", "oom_other_process"),
    ("学習を始めるとすぐにGPUメモリ不足になる\n", "oom_full"),
]
QUIET = [
    ("the loss is very high\n", ("loss_diverging",)),  # a level, not a rise
    ("I load the model with 4-bit quantization and the 4-bit double quantize option, then training OOMs.\n",
     ("oom_at_save",)),  # a QLoRA run's quantization is no conversion
    ("I can fine-tune without running into OOM now\n", ("oom_full", "oom_at_eval", "oom_at_save")),
    ("the log shows killed processes from a previous job\n", ("oom_full", "oom_at_eval", "oom_at_save", "exception")),
    ("每个step都卡住不动了\n", ("data_starved",)),  # a hang, not a stall between batches
    ("I loaded ../checkpoints/eval_best.pt and got CUDA out of memory\n", ("oom_at_eval",)),  # a path, no script run
    ("With PPO the policy loss goes up while the reward climbs.\n", ("loss_diverging", "loss_flat")),
    ("the loss of accuracy after quantization is small\n", ("loss_diverging", "loss_flat", "loss_zero")),
    ("the DataLoader child processes exit when training ends\n", ("oom_other_process",)),
    ("[rank0]:[W1203 10:00:01.123456 CUDACachingAllocator.cpp:3933] memory allocation failed with OOM on device 0 "
     "while trying to allocate 2097152 bytes (free: 1048576, total: 85899345920).\n", ("oom_full", "oom_at_eval")),
]


@pytest.mark.parametrize(("text", "want"), SAID)
def test_a_new_way_of_saying_it_is_read(text: str, want: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor(text, tmp_path, capsys)
    assert items and items[0]["id"] == want, (text, items)


@pytest.mark.parametrize(("text", "not_these"), QUIET)
def test_its_near_miss_is_not(text: str, not_these: tuple[str, ...], tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor(text, tmp_path, capsys)
    assert not [i for i in items if i["id"] in not_these], (text, items)


GRPO_TABLE = """Step  loss  grad_norm  reward_mean  clipped_ratio
1     0     0          0            1.0
2     0     0          0            1.0
...
8     0     0          0            1.0
"""
LM_TABLE = """Step  loss  grad_norm
10    2.31  1.2
20    2.05  0.9
30    0.0   0.0
40    0.0   0.0
"""


def test_a_printed_rl_table_with_no_gradient_is_flat(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The RL objective's loss at 0 is by design; its grad norm at 0 in every row is no learning."""
    items = doctor(GRPO_TABLE, tmp_path, capsys)
    assert items and items[0]["id"] == "loss_flat", items


def test_a_printed_lm_table_is_read_as_logs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor(LM_TABLE, tmp_path, capsys)
    assert items and items[0]["id"] == "loss_zero" and items[0]["step"] == 30, items


def test_a_caching_allocator_warning_then_the_oom_is_the_oom(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The warning is a retry that may still fail: the OutOfMemoryError after it is read as ever."""
    text = ("[rank0]:[W1203 10:00:01.123456 CUDACachingAllocator.cpp:3933] memory allocation failed with OOM on device "
            "0 while trying to allocate 2097152 bytes (free: 1048576, total: 85899345920).\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB. GPU 0 has a total capacity of "
            "80.00 GiB of which 1.00 MiB is free. Including non-PyTorch memory, this process has 79.99 GiB memory in "
            "use.\n")
    items = doctor(text, tmp_path, capsys)
    assert items and items[0]["id"] == "oom_full", items
