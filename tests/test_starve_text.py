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
from loratui.logic.advisor.starve import ProfileTable, UtilSamples
from loratui.logic.advisor.starve_said import said_starved


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
    "with num_workers=0 the training is very slow",
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
    "uploading the checkpoints to s3 is really slow",  # storage written to, not the data read
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
    text = "{'loss': 1.234, 'learning_rate': 2e-05, 'epoch': 0.5}\n" + WATCHDOG.replace("SeqNum=1,", "SeqNum=4521,") + "\n"
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


# -- the fresh dev batches (colB, colC): patterns first seen there -------------------------------------------


@pytest.mark.parametrize("line", [
    # https://github.com/nianticlabs/monodepth2/issues/157 (dev)
    "I am training on a RTX 2080 ti gpu but the gpu usage is not above 55%  and most of the times its less than "
    "10%.My batch size is 12",
    "GPU util never goes above 70% and often sits at 5%",
    # https://github.com/funcwj/ge2e-speaker-verification/issues/3 (dev)
    "it cost 30-40s.So most of the time,the gpu card have nothing to do.",
    "the GPUs are idle most of the time while the CPU decodes the audio",
    "my GPU waits for the dataloader after every batch",
])
def test_the_users_words_of_an_idle_gpu(line: str) -> None:
    assert said_starved(line, after_iteration=False) is not None, line


@pytest.mark.parametrize("line", [
    "GPU utilization is 100%, CPU 20%",  # the CPU's number, not the GPU's
    "GPU usage 98% with memory at 40%",
    "Is it normal that GPU utilization fluctuates between 85% and 100%?",
    "GPU usage looks normal but the loss stays low",
    "GPU utilization is high, throughput is low because of the long sequences",
])
def test_the_gpus_number_is_its_own(line: str) -> None:
    assert said_starved(line, after_iteration=False) is None, line


@pytest.mark.parametrize("line", [
    # https://github.com/huggingface/datasets/issues/6237 (dev)
    "I am trying to tokenize a few million documents with multiple workers but the tokenization process is taking "
    "forever.",
    # https://github.com/hiyouga/LlamaFactory/issues/1555 (dev)
    "数据量稍微大一些，在运行这个步骤“Running tokenizer on dataset”就要等半小时以上，然后才知道后续是否会报错。",
    # https://github.com/mozilla-extensions/regrets-reporter/pull/131 (dev)
    "at Colab tokenizing 7.5K rows of data takes now about 20 seconds instead of 17 minutes previously",
    "preprocessing the 40GB corpus with dataset.map took 3 hours on 64 cores",
    "数据预处理太慢了",
])
def test_preprocessing_said_to_take_long(line: str) -> None:
    found = said_starved(line, after_iteration=False)
    assert found is not None and found["said"] == "preprocessing", line


@pytest.mark.parametrize("line", [
    "tokenization took 2 minutes, then training started",  # a short wait is no problem to report
    "Running tokenizer on dataset: 100%|##########| 1000/1000 [00:01<00:00, 800.00 examples/s]",
    "preprocessing is not slow, the model is",
])
def test_preprocessing_that_is_not_slow(line: str) -> None:
    assert said_starved(line, after_iteration=False) is None, line


def test_loader_time_printed_alone() -> None:
    """https://github.com/mozilla/TTS/pull/407 (dev): `> Step:5 [...] LoaderTime:120.21 [...]`, no step timer."""
    text = "".join(f"> Step:{i} [...] LoaderTime:{t} [...]\n" for i, t in enumerate((124.64, 1.34, 0.00, 0.00,
                                                                                   120.21), 1))
    items = items_for(text)
    assert items[0].id == "data_starved" and "per step" in items[0].title


def test_small_loader_times_printed_alone_are_healthy() -> None:
    text = "".join(f"iter {i} loss {3.0 - i / 100:.3f} data_load_time: 0.0{i % 9}\n" for i in range(1, 30))
    assert not any(item.id == "data_starved" for item in items_for(text))


def test_timing_table_where_loading_dominates() -> None:
    """https://github.com/CubiCasa/CubiCasa5k/issues/26 (dev): a Markdown table of a step's parts."""
    text = ("Category|Time (sec)\n------------ | -------------\nLoad batch (n=24)|0.744230\n"
            "Model inference|0.037339\nBackpropagate|0.054847\nTraining iteration total|0.912715\n")
    items = items_for(text)
    assert items[0].id == "data_starved" and "81.5%" in items[0].title


def test_timing_table_where_compute_dominates() -> None:
    text = ("| part | seconds |\n|---|---|\n| data loading | 0.012 |\n| forward | 0.310 |\n| backward | 0.602 |\n"
            "| total per step | 0.930 |\n")
    assert not any(item.id == "data_starved" for item in items_for(text))


def test_store_get_error_in_a_barrier_while_tokenising() -> None:
    """https://github.com/hiyouga/ChatGLM-Efficient-Tuning/issues/137 (dev): rank 0 tokenised inside
    main_process_first; the other rank's barrier failed on the store (the message is cut before `Socket Timeout`)."""
    text = ("Running tokenizer on dataset: 47%|███████████████▊ | 3169000/6811963 [30:11<38:27, 1578.58 examples/s]"
            "Traceback (most recent call last):\n"
            '  File "/venv/lib/python3.9/site-packages/transformers/training_args.py", line 1891, in main_process_first\n'
            "    torch.distributed.barrier()\n"
            "RuntimeError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value "
            "store by key '0', but store->get('0') got error\n")
    items = items_for(text)
    assert items[0].id == "nccl_timeout" and "preprocessing the dataset" in items[0].title
    # the cut message says no timeout, but the bar it follows had run 30:11, past the 1800 s default
    # (advisor/prep_timeout.py reads the timeout from that bar and says how long the bar needs)
    assert "failed" in items[0].title or "the bar needs about" in items[0].title


# -- a training bar that slows down for good -------------------------------------------------------------


def bar(step: int, total: int, pace: str) -> str:
    return f"{step * 100 // total:3d}%|####      | {step}/{total} [01:00<10:00, {pace}]"


def test_a_training_bar_that_slows_for_good() -> None:
    paces = ["1.52it/s"] * 12 + ["1.10s/it", "2.40s/it", "3.10s/it"] + ["3.30s/it"] * 12
    text = "\n".join(bar(i, 2000, p) for i, p in enumerate(paces, 1)) + "\n"
    items = items_for(text)
    assert items[0].id == "data_starved" and "slowed" in items[0].title


def test_a_steady_training_bar_is_healthy() -> None:
    text = "\n".join(bar(i, 2000, "1.5%dit/s" % (i % 10)) for i in range(1, 40)) + "\n"
    assert not any(item.id == "data_starved" for item in items_for(text))


def test_a_slow_start_is_warm_up_not_starvation() -> None:
    paces = ["9.80s/it", "5.10s/it", "2.20s/it"] + ["1.40it/s"] * 30
    text = "\n".join(bar(i, 2000, p) for i, p in enumerate(paces, 1)) + "\n"
    assert not any(item.id == "data_starved" for item in items_for(text))


def test_an_evaluation_pause_is_not_a_slowdown() -> None:
    """tqdm smooths the rate: right after an evaluation the training bar reads slow for a few redraws."""
    before = [bar(i, 2000, "1.50it/s") for i in range(1, 20)]
    evaluation = ["***** Running Evaluation *****", "100%|##########| 50/50 [00:30<00:00, 1.66it/s]"]
    after = [bar(i, 2000, p) for i, p in zip(range(20, 26), ("30.2s/it", "21.0s/it", "14.9s/it", "10.6s/it",
                                                               "7.6s/it", "5.5s/it"))]
    assert not any(item.id == "data_starved" for item in items_for("\n".join(before + evaluation + after) + "\n"))


SMI_TABLE = """+-----------------------------------------------------------------------------+
| NVIDIA-SMI 525.85.12    Driver Version: 525.85.12    CUDA Version: 12.0     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
{rows}+-------------------------------+----------------------+----------------------+
"""


def smi(*utils: int) -> str:
    rows = "".join(f"|   {i}  NVIDIA A10G          On   | 00000000:00:1{i}.0 Off |                    0 |\n"
                   f"|  0%   41C    P0    88W / 300W |  20011MiB / 23028MiB |     {u}%      Default |\n"
                   for i, u in enumerate(utils))
    return SMI_TABLE.replace("{rows}", rows)


def test_a_pasted_snapshot_with_every_gpu_nearly_idle() -> None:
    items = items_for(smi(25))
    assert items[0].id == "data_starved" and "1 reading " in items[0].title
    assert items_for(smi(18, 27))[0].id == "data_starved"


@pytest.mark.parametrize("utils", [(25, 95), (100,), (88, 91, 97)])
def test_a_snapshot_with_a_busy_gpu_is_not_starved(utils: tuple[int, ...]) -> None:
    assert not any(item.id == "data_starved" for item in items_for(smi(*utils)))


@pytest.mark.parametrize("line", [
    # https://github.com/walkwithfastai/walkwithfastai.github.io/issues/19 (dev)
    "my models just running resnet50 on an image set is taking 4 hours an epoch. It used to take about 4 minutes.",
    "Each epoch suddenly takes 50 min, yesterday it was 12 min with the same config",
    "an iteration used to be 0.5s, now it is 3s",
])
def test_the_same_work_said_to_take_much_longer(line: str) -> None:
    found = said_starved(line, after_iteration=False)
    assert found is not None and found["said"] == "slowdown", line


@pytest.mark.parametrize("line", [
    "Each epoch takes 10 minutes, it used to take 9 minutes",  # a little slower is noise
    "training takes 4 hours on 1 GPU and 1 hour on 4 GPUs",  # no before and after
    "It used to take 4 minutes to download the model, now 40 minutes",  # not the training's work
    "Before training, tokenizing takes 2 minutes; each epoch takes 1 hour",  # two works, no slowdown
])
def test_durations_that_are_not_a_slowdown(line: str) -> None:
    assert said_starved(line, after_iteration=False) is None, line


@pytest.mark.parametrize("line", [
    "I timed it: loading one batch takes about 2.3 s while forward+backward takes 0.2 s",
    "the dataloader takes 40 seconds to produce the first batch of every epoch",
    "__getitem__ costs 1.5s because every sample decodes a 4K video",
    "数据加载耗时5秒，GPU计算只要0.1秒",
])
def test_the_loader_timed_in_words(line: str) -> None:
    assert said_starved(line, after_iteration=False) is not None, line


@pytest.mark.parametrize("line", [
    "loading one batch takes 0.02 s",  # no wait worth naming
    "the dataloader does not take 2 s, it is instant",
])
def test_a_quick_loader_in_words(line: str) -> None:
    assert said_starved(line, after_iteration=False) is None, line


@pytest.mark.parametrize("text, change", [
    ("the tokenization process is taking forever\n", "map(batched=True)"),
    ("the images are read from an NFS mount and it is really slow\n", "local disk"),
    ("CPU usage is 100% on all cores while the GPU sits idle\n", "cheaper to prepare"),
    ("GPU utilization is very low, around 20%\n", "raise dataloader_num_workers"),
])
def test_the_change_follows_where_the_time_goes(text: str, change: str) -> None:
    """More loader workers help a starved loader, not tokenisation done once, slow storage or a saturated CPU."""
    assert change in items_for(text)[0].title


def test_megatron_timers_where_the_batch_generator_dominates() -> None:
    line = ("time (ms) | forward-backward: 1210.52 | forward-compute: 401.33 | backward-compute: 805.10 | "
            "batch-generator: 2950.17 | optimizer: 35.02")
    items = items_for(line + "\n")
    assert items[0].id == "data_starved" and "70.9%" in items[0].title


def test_megatron_timers_one_per_line_healthy() -> None:
    text = ("    forward-backward ...............................: (4401.77, 4402.45)\n"
            "    batch-generator ................................: (3.10, 4.82)\n"
            "    optimizer ......................................: (40.22, 40.31)\n")
    assert not any(item.id == "data_starved" for item in items_for(text))


# -- the colE/colF dev batches -----------------------------------------------------------------------------


@pytest.mark.parametrize("line, said", [
    # https://github.com/NVlabs/GCVit/issues/14 (dev)
    ("dataloader seems using only single process to handle image processing, num_workers waiting 1 process. gpu is "
     "fast ,but the cpu is slow. why is that?", "cpu_busy"),
    ("The GPUs are waiting, the CPU is the bottleneck (JPEG decoding)", "cpu_busy"),
    # https://github.com/huggingface/datasets/issues/6319 (dev)
    ("map slows down to a crawl at around 80% done, lingers maybe until 97% extremely slowly and NEVER finishes the "
     "job. It just hangs.", "preprocessing"),
    ("ds.map(tokenize) is stuck at 99% for hours", "preprocessing"),
    # https://github.com/huggingface/transformers/issues/1621 (dev)
    ("That means, BPE takes a long time. Here is a quick benchmark in my 4th gen i7 CPU:", "preprocessing"),
    # https://github.com/PaddlePaddle/PaddleOCR/issues/3032 (dev)
    ("你好，我用gpu跑训练，利用率最多能到19%，正常就是保持在10%，是不是代码中大部分都是调用的cpu来计算", "util"),
])
def test_more_words_of_starvation(line: str, said: str) -> None:
    found = said_starved(line, after_iteration=False)
    assert found is not None and found["said"] == said, line


@pytest.mark.parametrize("line", [
    "the mAP is slow to improve after epoch 20",  # the detection metric, not datasets' map
    "CPU利用率只有20%",  # the CPU's utilisation
    "CPU offload makes the optimizer step slow",  # the CPU runs the optimizer, it does not feed batches
])
def test_words_of_other_things(line: str) -> None:
    assert said_starved(line, after_iteration=False) is None, line


def test_a_snapshot_of_full_cards_at_low_utilisation_says_memory_not_data() -> None:
    """https://github.com/ray-project/ray/issues/376 (dev): every card 11283 of 11439 MiB at 14%: memory held (by
    leftover workers), no verdict on data."""
    row = "| N/A   59C    P0    55W / 149W |  11283MiB / 11439MiB |     14%      Default |"
    assert not any(item.id == "data_starved" for item in items_for("\n".join([row] * 3) + "\n"))


FEW_WORKERS = ("/venv/lib/python3.10/site-packages/pytorch_lightning/trainer/connectors/data_connector.py:224: "
               "PossibleUserWarning: The dataloader, val_dataloader 0, does not have many workers which may be a "
               "bottleneck. Consider increasing the value of the `num_workers` argument` (try 16 which is the number "
               "of cpus on this machine) in the `DataLoader` init to improve performance.")


def test_few_workers_by_the_programs_design_is_healthy() -> None:
    """https://github.com/official-stockfish/nnue-pytorch/issues/289 (dev): the trainer's own note says its loader
    runs with 0 workers; Lightning's warning is then by design."""
    text = FEW_WORKERS + "\n\n num_workers has to be 0 for sparse, and 1 for dense\n"
    assert not any(item.id == "data_starved" for item in items_for(text))
    assert items_for(FEW_WORKERS + "\n")[0].id == "data_starved"


HEALTHY_STARTS = [
    # LLaMA-Factory: its dataset steps run in seconds
    "Converting format of dataset (num_proc=16): 100%|██████████| 1000/1000 [00:00<00:00, 5832.40 examples/s]\n"
    "Running tokenizer on dataset (num_proc=16): 100%|██████████| 1000/1000 [00:03<00:00, 301.22 examples/s]\n",
    # axolotl and datasets
    "Tokenizing Prompts (num_proc=8): 100%|██████████| 2000/2000 [00:05<00:00, 400.10 examples/s]\n"
    "Generating train split: 52002 examples [00:00, 150000.00 examples/s]\n"
    "Map: 100%|██████████| 52002/52002 [00:21<00:00, 2450.31 examples/s]\n",
    # Lightning's bar at a steady pace
    "".join(f"Epoch 0:  {i}%|█         | {i}/100 [00:{i // 10:02d}<00:10, 9.5{i % 10}it/s, v_num=0, train_loss=0.{90 - i}]\n"
            for i in range(10, 60)),
    # MMEngine's timers: the data wait is a hundredth of the step
    "".join(f"Epoch(train) [1][{i}/735]  lr: 1.9870e-04  eta: 2:46:39  time: 2.8906  data_time: 0.0042  memory: "
            f"10762  loss: {2.75 - i / 1000:.4f}\n" for i in range(10, 300, 10)),
    # unsloth's banner
    "==((====))==  Unsloth - 2x faster free finetuning | Num GPUs used = 1\n"
    "   \\\\   /|    Num examples = 51,760 | Num Epochs = 1 | Total steps = 60\n"
    "O^O/ \\_/ \\    Batch size per device = 2 | Gradient accumulation steps = 4\n",
    # a busy GPU in nvidia-smi during training
    "|  0%   61C    P0   290W / 300W |  20011MiB / 23028MiB |     97%      Default |\n"
    "|  0%   60C    P0   288W / 300W |  20011MiB / 23028MiB |     99%      Default |\n",
]


@pytest.mark.parametrize("text", HEALTHY_STARTS, ids=["llamafactory", "axolotl_datasets", "lightning", "mmengine",
                                                      "unsloth", "busy_smi"])
def test_healthy_output_of_many_tools_is_not_starved(text: str) -> None:
    assert not any(item.id == "data_starved" for item in items_for(text))


# -- the colE dev batch ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("line", [
    # https://github.com/googlecolab/colabtools/issues/1970 (dev)
    "Pytorch Dataloader takes very very long time to load one batch on GPU (it is still slow but much faster when on "
    "cpu)",
    "the data loader takes forever to yield the first batch",
    # https://github.com/fastai/fastai/issues/2203 (dev)
    "Before training, the notebook seems to do nothing at all for over one minute, even for this little task.",
    "it hangs for 5 minutes before each epoch starts, then the epoch itself takes 20 seconds",
])
def test_a_loader_that_takes_long_in_words(line: str) -> None:
    assert said_starved(line, after_iteration=False) is not None, line


@pytest.mark.parametrize("line", [
    "the dataloader does not take long, the model does",
    "Before training, I evaluate the baseline for 2 minutes",  # work, not a stall
])
def test_waits_that_are_not_the_loader(line: str) -> None:
    assert said_starved(line, after_iteration=False) is None, line


def test_the_loader_named_as_the_reason_of_a_slow_training() -> None:
    """https://github.com/huggingface/transformers/issues/25593 (dev): slowness said on one line, the loader named as
    its reason on the next."""
    text = ("But when doing training I found that the speed was very slow, especially when I use many GPU workers .\n"
            "I found that the reason was because HuggingFace Trainer used DispatchDataloader to read Iterable DataSet.\n")
    items = items_for(text)
    assert items[0].id == "data_starved" and "DispatchDataloader" in items[0].evidence[0]


def test_the_loader_named_as_the_reason_of_an_error_is_not_starvation() -> None:
    assert not any(item.id == "data_starved" for item in items_for(
        "I found that the reason was a typo in my DataLoader code, fixed now\n"))


def test_a_timeout_long_after_the_preprocessing_finished_is_not_blamed_on_it() -> None:
    """Training logged its losses after the tokenizer's bar: the preprocessing was over when the timeout came."""
    text = ("Running tokenizer on dataset (num_proc=32): 100%|██████████| 500000/500000 [12:00<00:00, 694.44 "
            "examples/s]\n"
            + "".join(f"{{'loss': {2.0 - i / 100:.4f}, 'learning_rate': 2e-05, 'epoch': {i / 100:.2f}}}\n"
                      for i in range(1, 20))
            + WATCHDOG.replace("SeqNum=1,", "SeqNum=98765,") + "\n")
    items = items_for(text)
    assert items[0].id == "nccl_timeout" and "preprocessing" not in items[0].title


def test_a_slow_training_whose_user_tunes_the_loader() -> None:
    text = "My training is very slow on 4 V100s.\nI already tried num_workers=8 and pin_memory=True.\n"
    assert items_for(text)[0].id == "data_starved"


def test_the_loaders_knobs_in_a_healthy_config_dump_are_not_starvation() -> None:
    text = "dataloader_num_workers=4,\ndataloader_pin_memory=True,\n{'loss': 1.2, 'learning_rate': 2e-05, 'epoch': 0.1}\n"
    assert not any(item.id == "data_starved" for item in items_for(text))


def test_utilisation_zero_without_a_percent_sign() -> None:
    assert said_starved("the Volatile GPU-Util is always 0 while the memory is full", after_iteration=False)
    assert said_starved("GPU usage 0.5 GB", after_iteration=False) is None


@pytest.mark.parametrize("lines", [
    ["# gpu sm, mem", "    0  12  3"],  # a dmon-like header whose `sm` is glued to a comma
    ["# utilization.gpu [%], memory.used [MiB]", "3 %, 20000 MiB"],  # the name glued to a comment mark
    ["name | utilization.gpu", "a, b, c"],
    ["|  Action  | Percentage % |", "| enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__ |"],
])
def test_odd_headers_are_read_without_a_traceback(lines: list[str]) -> None:
    items_for("\n".join(lines) + "\n")  # no exception: odd input gets a reading or none, never a crash


def test_caffes_empty_prefetch_queue_is_its_data_layer_falling_behind() -> None:
    """Caffe's blocking_queue logs `Data layer prefetch queue empty` when the net waits for a batch (wave 20's dev
    half); said as information, since once at the first iteration is the queue filling up."""
    line = "I1129 16:13:38.056454 14469 blocking_queue.cpp:50] Data layer prefetch queue empty\n"
    items = items_for(line)
    assert items[0].id == "data_starved" and items[0].severity == "info" and "prefetch queue" in items[0].title
