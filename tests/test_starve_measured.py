"""Issue 23: the data's preparation MEASURED as slow, in a person's words or a program's line (starve_measured): the
whole dataset's preparation timed at minutes or more, its rate falling several times over or to single digits, the
wait for each batch timed at a second or more per iteration. Lines quoted from dev records name their source; the
others are other people's wordings of the same measures (other tools, verbs, numbers, Chinese). Other jobs timed
(the model's load, a download, training itself), short times and denials read as nothing."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream
from loratui.logic.advisor.starve_said import said_starved
from loratui.logic.advisor.starve_measured import measured


def first_id(text: str) -> str:
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return items[0].id if items else ""


OPENR1 = ("It takes about 10 minutes for tokenization and packing every time. This seems inefficient for "
          "experimentation and debugging.")
"""https://github.com/huggingface/open-r1/issues/435 (dev)."""
LLAMAFACTORY_570S = ("06/02/2023 06:16:54 - INFO - utils.common - Loaded tokenizer in 569.9713776111603 seconds. "
                     "接近10分钟了。")
"""https://github.com/hiyouga/LlamaFactory/issues/3 (dev)."""
OPENRLHF = "这一块的逻辑好像会比较慢，130k数据需要20min处理"
"""https://github.com/OpenRLHF/OpenRLHF/issues/409 (dev)."""
TOKENIZER_RATE = "训练过程中，Running tokenizer on dataset 的速度逐渐从 几百 samples/s 下降到 个位数。 请教下可能是哪里有问题？"
"""https://github.com/hiyouga/LlamaFactory/issues/5443 (dev)."""
COSMOS = ("Without this fix it takes about 3.2s between iterations to get data, with the fix time is less than 50ms. "
          "I've tested it on 7B diffusion Text2World.")
"""https://github.com/nvidia-cosmos/cosmos-predict1/pull/31 (dev)."""


@pytest.mark.parametrize("line", [
    OPENR1, LLAMAFACTORY_570S, OPENRLHF,
    "Tokenizing the 2M-row dataset took 45 minutes before the first step.",
    "packing the dataset needs ~2h on every launch of axolotl",
    "The map() call over 500k examples runs for 25 min",
    "数据预处理花了一个多小时才开始训练",
    "Preprocessing finished in 1843.2s",
])
def test_the_whole_datasets_preparation_timed_at_minutes(line: str) -> None:
    assert measured(line) == {"said": "preprocessing", "quote": line.strip()[:300]}


@pytest.mark.parametrize("line", [
    TOKENIZER_RATE,
    "Running tokenizer on dataset starts at 3000 examples/s and slows to 40 examples/s",
    "the preprocessing speed dropped from 1200 samples/s to 90 samples/s after 30%",
    "map 的速度从 2000 it/s 掉到 50 it/s",
    "tokenization throughput falls to single digits after the first 10%",
])
def test_the_preparations_rate_falling(line: str) -> None:
    assert measured(line) is not None and measured(line)["said"] == "preprocessing"


@pytest.mark.parametrize("line", [
    COSMOS,
    "each step waits about 2 s for the next batch",
    "every iteration spends 1.5 s fetching data",
    "数据加载每个iter要3秒",
    "the dataloader takes 4 seconds per batch on the NFS mount",
])
def test_the_wait_for_each_batch_timed(line: str) -> None:
    assert measured(line) is not None and measured(line)["said"] == "delay"


@pytest.mark.parametrize("line", [
    "Training took 5 hours", "Loading the model took 10 minutes", "Loading checkpoint shards: 100%| 4/4 [12:03<00:00]",
    "Tokenization only takes 2 minutes", "preprocessing took 30 seconds", "Downloading the dataset took 20 minutes",
    "each batch takes 0.2 s to load", "each step takes 2 s", "loading the data per step takes 300ms",
    "tokenization is fast, training takes 3 hours", "I trained on 8 H100 for the tokenized data",
    "we have 10M samples tokenized", "the preprocessing speed went from 100 to 90 samples/s",
    "数据处理很快，训练需要10小时", "预处理不到10分钟", "the tokenizer went from 100 to 3000 examples/s",
    "evaluation on the tokenized test set takes 20 minutes", "saving the processed dataset took 15 minutes",
])
def test_other_work_short_times_and_denials_are_no_measure(line: str) -> None:
    assert measured(line) is None


@pytest.mark.parametrize("text", [OPENR1, LLAMAFACTORY_570S, OPENRLHF, TOKENIZER_RATE, COSMOS])
def test_the_doctor_names_starvation_first(text: str) -> None:
    """Before starve_measured these read as healthy: no reader fired."""
    assert first_id(text) == "data_starved"


# -- the GPU's busy share as a range ------------------------------------------------------------------------

FLAGEMBEDDING = ("However, given the script examples provided in this repo, my GPU is capped at around 40-50% of "
                 "processing power on an A10 (VRAM is fully loaded).")
"""https://github.com/FlagOpen/FlagEmbedding/issues/208 (dev)."""


@pytest.mark.parametrize("line", [
    FLAGEMBEDDING, "the A100 sits at around 20~35% during training", "my RTX 4090 is only running at 35-45% of its capacity",
    "GPU usage hovers at 30-40% the whole time",
])
def test_a_gpu_busy_half_the_time_or_less_as_a_range(line: str) -> None:
    """The range's top is the GPU's busy share: at most half is a GPU waiting (before: only a single number read)."""
    said = said_starved(line, False)
    assert said is not None and said["said"] == "util"


@pytest.mark.parametrize("line", [
    "GPU is at 90-100% all the time", "GPU memory is at 40-50%", "the GPU runs at 60-80%", "GPU temperature is at 40-50%",
])
def test_a_busy_gpu_or_another_quantitys_range_is_no_starvation(line: str) -> None:
    assert said_starved(line, False) is None


def test_the_doctor_reads_the_capped_gpu() -> None:
    assert first_id(FLAGEMBEDDING) == "data_starved"


# -- the pace that does not follow the model's size -------------------------------------------------------------

MMPOSE = ("Model | Input size | Batch size per gpu | MMPose (s/iter)\n-- | -- | -- | --\n"
          "Resnet_50 | 256x192 | 64 | 0.88\nResnet_50 | 384x288 | 64 | 1.3\nResnet_101 | 256x192 | 64 | 0.88\n"
          "Resnet_101 | 384x288 | 32 | 0.64\nHrnet_w32 | 256x192 | 64 | 0.88\n\n4 NVidia V100SXM2 (16G memory)\n")
"""https://github.com/open-mmlab/mmpose/issues/23 (dev): ResNet-50 and ResNet-101 at the same 0.88 s/iter."""


@pytest.mark.parametrize("line", [
    "ResNet-50 and ResNet-101 both run at 0.88 s/iter",
    "switching from 7B to 13B does not change the speed at all",
    "the speed is the same whether I use bert-base or bert-large",
    "用1.5B和7B的模型速度差不多", "换成更大的模型速度也没变", "even a smaller model trains just as slowly",
])
def test_the_same_pace_for_a_small_and_a_big_model(line: str) -> None:
    from loratui.logic.advisor.starve_pace import same_pace_said

    assert same_pace_said(line) is not None


@pytest.mark.parametrize("line", [
    "7B and 13B give the same loss", "the 13B is twice as slow as the 7B", "the speed is the same with fp16 and bf16",
    "the speed is the same as yesterday", "7B runs at 2 it/s and 13B at 1 it/s",
])
def test_a_pace_that_follows_the_model_or_another_change_is_no_sign(line: str) -> None:
    from loratui.logic.advisor.starve_pace import same_pace_said

    assert same_pace_said(line) is None


@pytest.mark.parametrize("text", [
    MMPOSE,
    "| model | seq len | batch | s/it |\n|---|---|---|---|\n| Qwen2.5-1.5B | 2048 | 8 | 3.10 |\n"
    "| Qwen2.5-7B | 2048 | 8 | 3.12 |\n",
])
def test_a_benchmark_table_whose_sizes_share_one_time(text: str) -> None:
    assert first_id(text) == "data_starved"


def test_a_table_whose_time_grows_with_the_model_is_no_sign() -> None:
    text = ("| model | seq len | batch | s/it |\n|---|---|---|---|\n| Qwen2.5-1.5B | 2048 | 8 | 0.90 |\n"
            "| Qwen2.5-7B | 2048 | 8 | 3.12 |\n| Qwen2.5-7B | 4096 | 8 | 3.10 |\n")
    assert first_id(text) != "data_starved"


@pytest.mark.parametrize(("line", "said"), [
    ("it/s drops from 4 to 0.5 after I switched to streaming=True", "slowdown"),
    ("with the NFS mount the speed fell from 3.2 it/s to 0.4 it/s", "slowdown"),
    ("Tokenization takes longer than the actual training", "preprocessing"),
    ("数据预处理比训练本身还慢", "preprocessing"),
])
def test_a_speed_falling_with_the_feed_named_or_preparation_outlasting_training(line: str, said: str) -> None:
    assert measured(line) == {"said": said, "quote": line}


@pytest.mark.parametrize("line", [
    "after raising num_workers the speed went from 0.5 to 4 it/s",  # faster
    "s/it dropped from 8 to 1 after raising num_workers",  # a time per step falling: faster
    "dataloader speed dropped from 10 to 9 it/s",  # not several times
    "the tokenizer is not slower than training",
])
def test_a_speed_up_a_small_change_or_a_denial_is_no_measure(line: str) -> None:
    assert measured(line) is None


# -- the run's time across the loader's settings; a slow run blamed on the loader; a step's time outside the model --

@pytest.mark.parametrize("line", [
    "With num_workers=0 training takes 10 hours, with num_workers=8 it takes 2 hours.",
    "num_workers=2: 45 min/epoch, num_workers=16: 12 min/epoch",
    "setting pin_memory=True made the epoch 3x faster: 30 min instead of 90 min",
    "训练速度很慢，发现是数据加载的问题", "The slowdown turned out to be the dataloader reading from NFS",
])
def test_the_runs_pace_follows_the_loader(line: str) -> None:
    assert measured(line) == {"said": "loader", "quote": line}


@pytest.mark.parametrize("line", [
    "With num_workers=8 the epoch takes 2 hours and 10 minutes",  # one compound time
    "I set num_workers=4; training takes 3 hours and eval takes 20 minutes",  # two jobs, one setting
    "num_workers=4 and num_workers=8 both take 1h 30m per epoch",
    "with num_workers=2 an epoch is 40 minutes, with num_workers=8 it is 38 minutes",  # the loader is not it
    "训练很慢，不是数据加载的问题", "the slowness is not caused by the dataloader",
])
def test_the_loader_compared_without_a_difference_or_denied(line: str) -> None:
    assert measured(line) is None


def test_a_steps_time_mostly_outside_the_model_is_its_wait() -> None:
    from loratui.logic.advisor.starve_timed import timed_parts

    found = timed_parts("Each iteration takes 5 seconds but the forward and backward only take 0.3 seconds.")
    assert found is not None and found["data"] == pytest.approx(4.7)
    assert timed_parts("the iteration takes 2 s and the forward/backward 1.9 s") is None


def test_a_pause_at_each_epochs_start_is_a_wait_not_a_flat_loss() -> None:
    """`stuck for about 30 seconds` is a time: the run pauses (the loader's workers start again each epoch); before,
    `training gets stuck` read as a loss that does not move."""
    from loratui.logic.advisor import loss_words

    line = "My training gets stuck for about 30 seconds at the beginning of every epoch."
    assert loss_words.read(line) is None and first_id(line) == "data_starved"
    assert loss_words.read("the loss gets stuck for 5000 steps at 4.1").kind == "flat"  # type: ignore[union-attr]


@pytest.mark.parametrize("line", [
    "Training ran at 15-20% of the expected speed and the speed barely changed between H100 and A100",
    "moving from a V100 to an A100 did not change the s/it at all", "RTX 3090 and 4090 Ti give the same speed",
])
def test_the_same_pace_on_a_slow_and_a_fast_card(line: str) -> None:
    from loratui.logic.advisor.starve_pace import same_pace_said

    assert same_pace_said(line) is not None


@pytest.mark.parametrize("line", [
    "the H100 is 2x faster than the A100", "the loss barely changed between A100 and H100",
    "the speed is the same whether I use 1 or 2 GPUs",
])
def test_a_faster_card_that_is_faster_or_another_quantity_is_no_sign(line: str) -> None:
    from loratui.logic.advisor.starve_pace import same_pace_said

    assert same_pace_said(line) is None


def test_a_loss_said_constantly_zero() -> None:
    from loratui.logic.advisor import loss_words

    said = loss_words.read("training loss is constantly 0 with QLoRA and gradient checkpointing")
    assert said is not None and said.kind == "zero"


@pytest.mark.parametrize("text", [
    "The tokenization of the 50GB corpus has been running for two days now",  # a count in words
    "训练非常慢，一个epoch要10个小时，发现CPU一直是100%，GPU只有20%",  # 100% and 20% beside Chinese (no \b there)
    "After moving the dataset from the NFS share to a local NVMe the epoch time went from 3 h to 25 min",  # `3 h`
])
def test_measures_written_with_words_spaces_or_beside_chinese(text: str) -> None:
    assert first_id(text) == "data_starved"


@pytest.mark.parametrize("line", [
    "The tokenization finished in two minutes", "CPU一直是50%，GPU只有90%",
])
def test_short_or_busy_in_the_same_forms_is_no_sign(line: str) -> None:
    assert measured(line) is None and said_starved(line, False) is None
