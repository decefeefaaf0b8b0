"""Issue 23: data starvation read as a maintainer reads it, from text never seen: the user's words about the GPU's
utilisation (low, spiky, `0-30%`, `GPU利用率低`), pauses between batches, a busy CPU beside an idle GPU, a slow
loader or storage; utilisation sampled several times (nvidia-smi tables, `nvidia-smi dmon`, `--query-gpu` CSV);
a profiler table where fetching the next batch dominates. Lines quoted from dev-split records name their
source; the others are built from the pattern (other models, numbers, tools). Healthy text and other
categories' text must not read as starvation."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream
from loratui.logic.advisor.starve import ProfileTable, UtilSamples, said_starved


def items_for(text: str) -> list:
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return items


def first_id(text: str) -> str:
    items = items_for(text)
    return items[0].id if items else ""


# -- the user's words --------------------------------------------------------------------------------------

MEGENGINE = ("When running train script for image classification directory - resnet/shufflenet etc. I notice very "
             "spiky GPU utilization behavior.\n\nScale lr with batch size and  ngpus:\n> python3 train.py --data "
             "/home/ubuntu/imagenet --arch resnet50 --batch-size 64 --learning-rate 0.1 --ngpus 8\n\n"
             "Open a separate terminal window and run:\nwatch -n0.1 nvidia-smi\n\n"
             "You should see GPU-utilization almost oscillate between 60% - 100%\n"
             "This is consistency reproducible with all trials.\n")
"""https://github.com/MegEngine/Models/issues/2 (dev)."""
FBCUNN = ("Epoch: [1][1/10000] Time 0.42 ..\nEpoch: [1][2/10000] Time 0.42 ..\n"
          "----there is about 1~2 second delay here ----\nEpoch: [1][3/10000] Time 0.42 ..\n"
          "Epoch: [1][4/10000] Time 0.42 ..\n----there is about 1~2 second delay here ----\n")
"""https://github.com/facebookarchive/fbcunn/issues/21 (dev)."""


@pytest.mark.parametrize("text", [MEGENGINE, FBCUNN], ids=["megengine_spiky_util", "fbcunn_delay_between_batches"])
def test_dev_threads_read_as_starved(text: str) -> None:
    items = items_for(text)
    assert items and items[0].id == "data_starved"
    assert "waits for data" in items[0].title


@pytest.mark.parametrize("line", [
    "GPU utilization is very low (around 20%) while training llama-7b with LoRA",
    "The GPU util is only 0-30% and the training is slow",
    "gpu usage keeps fluctuating between 0% and 95%",
    "nvidia-smi shows Volatile GPU-Util at 3% most of the time",
    "Why is my GPU underutilized? training Qwen2-1.5B on one A100",
    "low GPU utilization when fine-tuning whisper",
    "训练的时候GPU利用率很低，只有10%左右",
    "显卡利用率一直忽高忽低",
    "CPU usage is 100% on all cores while the GPU sits idle",
    "I think data loading is the bottleneck here",
    "the dataloader seems very slow with 8 workers",
    "the images are read from an NFS mount and it is really slow",
    "there is a noticeable pause between batches, each step takes 0.3 s",
    "数据加载很慢，GPU一直在等",
])
def test_the_users_words_of_starvation(line: str) -> None:
    assert said_starved(line, after_iteration=False) is not None, line


@pytest.mark.parametrize("line", [
    "GPU utilization is 100% and memory usage is 70GB",
    "GPU utilization is not low, it stays at 99%",
    "GPU memory usage is low but I still get OOM",  # memory, not utilisation
    "high GPU utilization, 98%",
    "data loading is not the bottleneck, I checked with the profiler",
    "there is a 30 second pause at every checkpoint save",  # the save, not the loader
    "The training loss does not decrease after 3 epochs",
    "CUDA out of memory. Tried to allocate 2.00 GiB",
    "learning rate is low (1e-5)",
    "UserWarning: GPU utilization is low",  # a program's line, not the user's words
    "gpu_util = get_gpu_utilization()  # low when idle",
])
def test_words_that_are_not_starvation(line: str) -> None:
    assert said_starved(line, after_iteration=False) is None, line


def test_a_delay_of_seconds_counts_only_between_logged_iterations() -> None:
    line = "-- about 3 seconds of delay here --"
    assert said_starved(line, after_iteration=True) is not None
    assert said_starved(line, after_iteration=False) is None
    text = "step 10 loss 2.31 time 0.25\n<< 2-3 s pause >>\nstep 11 loss 2.30 time 0.25\n"
    assert first_id(text) == "data_starved"


# -- utilisation sampled ----------------------------------------------------------------------------------


def readings(lines: list[str]) -> UtilSamples:
    samples = UtilSamples()
    for line in lines:
        samples.line(line)
    return samples


DMON = ["# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk",
        "# Idx      W      C      C      %      %      %      %      %      %    MHz    MHz"]


def test_dmon_samples_that_dip_are_starved() -> None:
    rows = [f"    0    {p:3d}     51      -    {sm:3d}     {sm // 3:2d}      0      0      0      0   1593   1410"
            for p, sm in ((250, 97), (90, 4), (260, 99), (85, 0), (255, 96), (95, 12), (262, 98), (88, 3))]
    verdict = readings(DMON + rows).verdict()
    assert verdict is not None and verdict["dips"] == 4 and verdict["n"] == 8


def test_dmon_samples_of_a_busy_gpu_are_not() -> None:
    rows = [f"    0    300     60      -    {sm:3d}     40      0      0      0      0   1593   1410"
            for sm in (97, 99, 94, 100, 96, 98, 91, 99)]
    assert readings(DMON + rows).verdict() is None


def test_query_gpu_csv_low_utilisation() -> None:
    lines = ["timestamp, name, utilization.gpu [%], memory.used [MiB]"] + [
        f"2024/05/16 14:3{i}:00.000, NVIDIA A100-SXM4-80GB, {u} %, 61234 MiB" for i, u in enumerate((35, 12, 40, 28))]
    verdict = readings(lines).verdict()
    assert verdict is not None and verdict["mean"] == pytest.approx(28.75)


def test_csv_of_an_empty_gpu_is_no_reading() -> None:
    lines = ["name, utilization.gpu [%], memory.used [MiB]"] + ["NVIDIA L4, 0 %, 3 MiB"] * 6
    assert readings(lines).readings == []


def test_nvidia_smi_snapshots_doctor() -> None:
    row = "| N/A   45C    P0    {w}W / 400W |  38211MiB / 81920MiB |     {u}%      Default |"
    text = "\n".join(row.format(w=w, u=u) for w, u in ((120, 35), (300, 90), (110, 20), (115, 30), (290, 85)))
    items = items_for(text)
    assert items[0].id == "data_starved" and "busy on average" in items[0].title


def test_busy_snapshots_are_healthy() -> None:
    row = "| N/A   45C    P0   380W / 400W |  38211MiB / 81920MiB |     {u}%      Default |"
    text = "\n".join(row.format(u=u) for u in (99, 97, 100, 98, 96))
    assert not any(item.id == "data_starved" for item in items_for(text))


# -- profiler tables -------------------------------------------------------------------------------------


def test_torch_profiler_dataloader_row_dominates() -> None:
    table = ProfileTable()
    row = ("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__         2.15%      13.622ms        "
           "61.30%     388.450ms      38.845ms            10  ")
    found = table.line(row)
    assert found is not None and found["share"] == pytest.approx(61.3)


def test_torch_profiler_small_dataloader_row_is_not() -> None:
    row = ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__         0.35%       1.120ms         "
           "3.10%      10.450ms       1.045ms            10  ")
    assert ProfileTable().line(row) is None


def test_lightning_simple_profiler_percentage_column() -> None:
    table = ProfileTable()
    header = "|  Action                                       \t|  Mean duration (s)\t|  Num calls \t|  Total time (s) \t|  Percentage %   \t|"
    row = "|  [_TrainingEpochLoop].train_dataloader_next    \t|  0.41   \t|  1000  \t|  410.2   \t|  47.113   \t|"
    assert table.line(header) is None
    found = table.line(row)
    assert found is not None and found["share"] == pytest.approx(47.113)


# -- the rest of the text decides when it has an error -------------------------------------------------------


def test_an_oom_beside_low_utilisation_words_stays_an_oom() -> None:
    text = ("GPU utilization is low, around 20%\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "79.15 GiB of which 1.05 GiB is free.\n")
    assert first_id(text) != "data_starved"


def test_healthy_training_log_with_timers_stays_healthy() -> None:
    text = "\n".join(f"Epoch: [0][{i}/500]\tTime 0.412 (0.415)\tData 0.003 (0.004)\tLoss {2.5 - i * 0.01:.4f}"
                     for i in range(10, 40))
    assert not any(item.id == "data_starved" for item in items_for(text))


# -- a rank tokenising while the others time out ----------------------------------------------------------

WATCHDOG = ("[rank1]:[E516 10:02:11.000000000 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for "
            "1800094 milliseconds before timing out.")


def test_timeout_while_a_rank_tokenises_names_the_preprocessing_first() -> None:
    """The pattern of https://github.com/axolotl-ai-cloud/axolotl/issues/2684 (dev): the run died on the timeout
    (the error comes first), and the first item says why: one rank was still tokenising; raise ddp_timeout above
    the time the bar needs, or tokenise before launching."""
    text = ("Running tokenizer on dataset (num_proc=32):  40%|████      | 200000/500000 [20:00<30:00, 166.67 "
            "examples/s]\n" + WATCHDOG + "\n")
    items = items_for(text)
    assert items[0].id == "nccl_timeout"
    assert "preprocessing the dataset" in items[0].title and "ddp_timeout" in items[0].title
    assert "7200" in items[0].title  # twice the 50 minutes the bar needs, in whole hours
    assert any("Running tokenizer" in line for line in items[0].evidence)


def test_timeout_with_no_preprocessing_in_the_text_keeps_its_own_advice() -> None:
    text = "{'loss': 1.234, 'learning_rate': 2e-05, 'epoch': 0.5}\n" + WATCHDOG + "\n"
    items = items_for(text)
    assert items[0].id == "nccl_timeout" and "preprocessing" not in items[0].title


# -- program lines of other tools --------------------------------------------------------------------------


def test_tensorflow_profiler_input_bound() -> None:
    line = ("Your program is HIGHLY input-bound because 78.3% of the total step time sampled is waiting for input. "
            "Therefore, you should first focus on reducing the input time.")
    items = items_for(line + "\n")
    assert items[0].id == "data_starved" and "78.3%" in items[0].title


def test_tensorflow_profiler_not_input_bound() -> None:
    line = ("Your program is NOT input-bound because only 0.2% of the total step time sampled is waiting for "
            "input. Therefore, you should focus on reducing other time.")
    assert not any(item.id == "data_starved" for item in items_for(line + "\n"))


@pytest.mark.parametrize("line", [
    "Generating train split: 1843200 examples [41:07, 747.08 examples/s]",
    "Map (num_proc=16): 2210000 examples [1:02:13, 592.01 examples/s]",
])
def test_open_ended_dataset_bar_running_long(line: str) -> None:
    items = items_for(line + "\n")
    assert items[0].id == "data_starved" and "preprocessing" in items[0].title


@pytest.mark.parametrize("line", [
    "Generating train split: 52002 examples [00:01, 40211.12 examples/s]",  # seconds: no wait worth naming
    "Epoch 3: 1843200 it [41:07, 747.08 it/s]",  # a training loop's bar, not the data's
])
def test_short_or_training_bars_are_not_preprocessing(line: str) -> None:
    assert not any(item.id == "data_starved" for item in items_for(line + "\n"))
