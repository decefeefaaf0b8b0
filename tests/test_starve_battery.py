"""Issue 23: a battery of data starvation as people in general show it, built from the PATTERNS (not from any
corpus excerpt): the user's prose in English and Chinese, utilisation tables (nvidia-smi, gpustat, dmon, the
`--query-gpu` CSV), preprocessing bars crawling at a few hundred examples/s, loader timers in any naming,
profiler tables dominated by fetching the next batch, the loaders' own worker warnings, slow network storage.
Models, numbers, paths and tools vary on purpose. Negatives: a busy GPU, a slow first step (warm-up), a question
about num_workers with no slowness shown, a slow evaluation, a map that finished in seconds, a GPU idle because
the run crashed, healthy timers."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream


def first_id(text: str) -> str:
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return items[0].id if items else ""


# -- the user's prose ---------------------------------------------------------------------------------------

PROSE = [
    "GPU utilization is low during training, around 15%.",
    "GPU usage only 20% while fine-tuning mistral-7b with qlora",
    "GPU util fluctuates between 0 and 100 the whole time",
    "The GPU is idle most of the time.",
    "CPU is at 100% while the GPU waits",
    "Training is slow, the dataloader is the bottleneck.",
    "Data loading takes most of the time in each iteration.",
    "Tokenization takes hours on my 2M-sample dataset.",
    "dataset.map is very slow, any way to speed it up?",
    "It has been stuck at 'Running tokenizer on dataset' for 3 hours.",
    "My 4 GPUs are mostly idle: nvidia-smi shows 0% most of the time and it occasionally jumps to 100%.",
    "GPU utilization keeps dropping to 0% every few seconds.",
    "The bottleneck seems to be data loading, not the model.",
    "Most of the time is spent in the dataloader.",
    "Training speed is limited by the data loader.",
    "The A100 is barely used, GPU util is ~10%.",
    "Volatile GPU-Util stays at 0% most of the time.",
    "GPU load is 5-10% and the training is very slow.",
    "My H100 is underutilized, only 25% utilization.",
    "gpu utilization stays around 30-40% no matter the batch size",
    "Dataset preprocessing takes forever (over 6 hours just for tokenization).",
    "The map function takes about 2 hours for 1M examples.",
    "Loading the images from S3 is very slow and the GPU is waiting.",
    "Reading the data from NFS makes the training extremely slow.",
    "Each batch takes 5 seconds to load.",
    "__getitem__ is slow because I decode the audio on the fly.",
    "It takes 2 s to get the next batch while forward+backward takes 0.2 s.",
    "The GPU is waiting for data most of the time.",
    "Profiling shows 80% of the time is spent in collate_fn.",
    "With streaming=True the training is 3x slower and the GPU sits idle.",
    "The GPU is starving, how do I feed it faster?",
    "Our dataset lives on an NFS share and each epoch is 5x slower than from local SSD.",
    "The data is on a Google Drive mount in Colab and every epoch takes forever.",
    "GPU-Util goes up and down between 0% and 90%, the CPU is maxed out.",
    "Utilization of the GPU is really poor (under 20%) with the image pipeline.",
    "Training is extremely slow, 25 s/it, and nvidia-smi shows 5% util.",
    "One epoch takes 3 hours but the GPU is only used 10% of the time.",
    "htop shows all 16 cores at 100% and nvidia-smi shows the GPU at 7%.",
    "I only get 1.2 it/s on an A100 and the GPU utilization hovers around 30%.",
    "The RTX 3090 sits at 4% while the script runs.",
    "The first iteration of every epoch takes about 40 seconds, then it is fast.",
    "Each epoch takes 2 hours, of which 1.5 hours is spent loading data.",
    "Reading the parquet files is really slow and slows the whole training down.",
    "Loading data from LMDB is the slowest part of the training loop.",
    "Training speed dropped from 3 it/s to 0.5 it/s after switching to a streaming dataset.",
    "The model trains at 0.3 it/s; with a synthetic in-memory dataset it does 4 it/s.",
    "GPU util is 100% for a second then 0% for several seconds, periodically.",
    "The GPU stays idle for ~10s between batches.",
    "There's a long pause after every 8 batches (num_workers=8).",
    "My training loop spends 70% of each step waiting on the dataloader.",
    "Epoch 0:   3%|▎         | 30/1000 [10:00<5:23:20, 20.00s/it, v_num=1, train_loss=2.31]\n"
    "nvidia-smi shows 0% most of the time",
]
CHINESE = [
    "GPU利用率低，训练很慢",
    "GPU利用率只有30%左右",
    "数据加载慢，怎么优化？",
    "训练时CPU占满，GPU利用率上不去",
    "显卡利用率只有20%，CPU 100%",
    "GPU 利用率一直在 0% 和 100% 之间跳动",
    "tokenize 数据集要好几个小时",
    "数据预处理太慢了，要跑一整天",
    "Running tokenizer on dataset 卡了两个小时",
    "GPU使用率很低，大部分时间都在等数据",
    "数据加载成为瓶颈",
    "GPU 大部分时间空闲",
    "显卡占用率很低",
    "GPU利用率为0，CPU占用100%",
    "一直卡在 Running tokenizer on dataset",
    "tokenizer 处理数据非常慢",
]


@pytest.mark.parametrize("text", PROSE + CHINESE)
def test_starvation_in_the_users_words(text: str) -> None:
    assert first_id(text) == "data_starved", text


# -- utilisation tables -------------------------------------------------------------------------------------

def smi(utils: list[int], used: int = 38000, total: int = 81920) -> str:
    rows = []
    for i, util in enumerate(utils):
        rows += [f"|   {i}  NVIDIA A100-SXM4-80GB          On  | 00000000:0{i}:00.0 Off |                    0 |",
                 f"| N/A   41C    P0    88W / 400W |  {used}MiB / {total}MiB |     {util}%      Default |",
                 "|                               |                      |             Disabled |",
                 "+-------------------------------+----------------------+----------------------+"]
    head = ["+-----------------------------------------------------------------------------+",
            "| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2     |",
            "|-------------------------------+----------------------+----------------------+",
            "| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |",
            "| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |",
            "|===============================+======================+======================|"]
    return "\n".join(head + rows)


GPUSTAT = "\n".join([
    "node-3                   Tue Jun  4 10:12:01 2024  535.104.05",
    "[0] NVIDIA GeForce RTX 4090 | 45'C,   3 % | 18512 / 24564 MB | alice(18000M)",
    "[1] NVIDIA GeForce RTX 4090 | 44'C,   0 % | 18490 / 24564 MB | alice(18000M)",
])
DMON = "\n".join(
    ["# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec   mclk   pclk",
     "# Idx      W      C      C      %      %      %      %    MHz    MHz"]
    + [f"    0    {90 + sm}     48      -    {sm:3d}     {sm // 4:2d}      0      0   1593   1410"
       for sm in (12, 0, 35, 2, 8, 0, 41, 5)])
CSV = "\n".join(["timestamp, name, utilization.gpu [%], memory.used [MiB]"]
                + [f"2024/06/04 10:12:{s:02d}.000, Tesla V100-SXM2-32GB, {u} %, 21344 MiB"
                   for s, u in ((1, 7), (2, 0), (3, 22), (4, 3), (5, 0), (6, 15))])


WANDB = "\n".join(f"system/gpu.0.gpu: {u}" for u in (12.5, 0.0, 3.1, 40.2, 0.0, 7.7))
LIGHTNING_STATS = "\n".join(f"{{'cuda:0/utilization.gpu (%)': {u}.0, 'cuda:0/memory.used (MB)': 20112.0}}"
                             for u in (4, 0, 31, 2, 0))
DCGM = "\n".join(f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="GPU-1a2b",Hostname="node7"}} {u}' for u in (0, 5, 61, 0, 3))
ROCM = "\n".join(f"GPU[{i}]\t\t: GPU use (%): {u}" for i, u in enumerate((2, 0, 9, 1)))
SMI_Q = "\n".join(["    Utilization", "        Gpu                               : 3 %",
                    "        Memory                            : 1 %"])
NOHEADER = "\n".join(f"0, {u} %, 21344 MiB" for u in (3, 0, 48, 1, 0, 6))
CSV_UTIL_ONLY = "utilization.gpu [%]\n3 %\n0 %\n12 %\n0 %\n5 %"  # `--query-gpu=utilization.gpu --format=csv -l 1`


@pytest.mark.parametrize("text", [smi([3]), smi([0, 2, 5, 1]), smi([12, 9], used=60000), GPUSTAT, DMON, CSV,
                                  CSV_UTIL_ONLY, WANDB, LIGHTNING_STATS, DCGM, ROCM, SMI_Q, NOHEADER],
                         ids=["smi_one", "smi_four", "smi_two", "gpustat", "dmon", "csv", "csv_util_only", "wandb",
                              "lightning_stats", "dcgm", "rocm", "smi_q", "csv_noheader"])
def test_low_utilisation_in_a_table(text: str) -> None:
    assert first_id(text) == "data_starved"


def test_a_snapshot_pasted_for_its_memory_is_not_read_for_speed() -> None:
    assert first_id("Why does my LoRA run hold 38 GB? Here is nvidia-smi:\n" + smi([0])) != "data_starved"
    assert first_id("Training is slow. Here is nvidia-smi:\n" + smi([0])) == "data_starved"
    assert first_id("It holds 38 GB and it is slow. Here is nvidia-smi:\n" + smi([0])) == "data_starved"


# -- rates --------------------------------------------------------------------------------------------------

RATES = [
    "Map:  12%|█▏        | 120000/1000000 [40:00<4:53:20, 50.01 examples/s]",
    "Running tokenizer on dataset:   3%|▎         | 30000/1000000 [20:11<10:52:00, 24.70 examples/s]",
    "Tokenizing train dataset (num_proc=1):   5%|▌         | 50000/1000000 [15:02<4:45:38, 55.40 examples/s]",
    "Filter:  40%|████      | 400000/1000000 [30:00<45:00, 222.22 examples/s]",
    "Generating train split: 2300000 examples [55:10, 694.71 examples/s]",
    "Grouping texts in chunks of 4096:  8%|▊         | 80/1000 [12:00<2:18:00,  9.00s/ba]",
    "\r".join(f"Map:  {p}%|██▎       | {p * 10000}/1000000 [0:{p:02d}:00<2:00:00, 273.00 examples/s]" for p in range(1, 30)),
    "Map: 100%|██████████| 1000000/1000000 [1:02:10<00:00, 268.1 examples/s]",  # it finished, after an hour
    "#0:  12%|█▏        | 120/1000 [10:00<1:13:20,  5.00ba/s]",  # datasets' older multiprocess map
    "Applying chat template to train dataset:   9%|▉         | 9000/100000 [03:00<30:20, 50.00 examples/s]",
    "Filter (num_proc=4):  50%|█████     | 500000/1000000 [45:00<45:00, 185.19 examples/s]",
    "Packing train dataset:  10%|█         | 10000/100000 [05:00<45:00, 33.33 examples/s]",
    "Map: 100% 1000000/1000000 [1:02:10<00:00, 268.10 examples/s]",  # a notebook's widget copied as text
    "Tokenizing train dataset: 23% 230000/1000000 [14:02<47:00, 273.00 examples/s]",
]


@pytest.mark.parametrize("line", RATES)
def test_a_preprocessing_bar_that_crawls(line: str) -> None:
    assert first_id(line) == "data_starved"


def test_a_training_bar_whose_seconds_per_step_keep_rising() -> None:
    rates = [1.0, 1.0, 1.1, 1.0, 1.0, 1.1, 1.0, 3.0, 5.2, 7.9, 8.3, 8.1, 8.5, 8.2, 8.4, 8.3, 8.6, 8.2, 8.4, 8.5]
    text = "\n".join(f"{i * 2}%|▏ | {i * 20}/1000 [{i:02d}:00<30:00, {r:.2f}s/it]" for i, r in enumerate(rates, 1))
    assert first_id(text) == "data_starved"


# -- loader timers in any naming ------------------------------------------------------------------------------

TIMERS = [
    "\n".join(f"Epoch: [0][{i:4d}/5005]\tTime  2.512 ( 2.604)\tData  2.301 ( 2.398)\tLoss 6.8{i % 10} (6.9)"
              for i in (100, 110, 120)),  # PyTorch's ImageNet example
    "\n".join(f"Epoch(train)  [1][{i}/1000]  lr: 1.0000e-04  eta: 1:00:00  time: 1.2000  data_time: 0.9500  "
              f"memory: 8000  loss: 2.3{i // 50}" for i in (50, 100, 150)),  # MMEngine
    "\n".join(f"step {i} | batch_time 0.85 | data_time 0.62 | loss 2.{i // 10}" for i in (10, 20, 30, 40)),
    "\n".join(f"eta: 2:10:00  iter: {i}  total_loss: 2.1{i % 7}  time: 1.4021  data_time: 1.1034  lr: 0.0002  "
              f"max_mem: 5000M" for i in (19, 39, 59)),  # detectron2
    "\n".join(f"[iter {i}] data: 2.10s  step: 0.25s  loss: 3.{i}" for i in (1, 2, 3, 4)),
    "\n".join(f"it {i}: fetch_time=1.85 compute_time=0.31 loss=1.{i}" for i in (1, 2, 3)),
    "\n".join(f"Iter {i}/5000 | data_load: 880ms | train: 240ms | loss {2.1 - i / 100:.3f}" for i in range(10, 60, 10)),
    "\n".join(f"epoch 0 step {i}: throughput 12.1 samples/s, dataloader wait {78.2 - i:.1f}%" for i in range(3)),
    "Training is very slow, it needs weeks to finish:\n2024-01-05 10:00:00 - INFO - Epoch [1][40/5000]  lr: 0.01, "
    "eta: 40 days, 1:00:00, time: 18.120, data_time: 7.503, memory: 6100, loss: 5.9",  # one line, and the words
    "\n".join(f"Train: [1/50][{i}/800] Data {d:.3f} (0.412) Batch {b:.3f} (0.903) Remain 20:11:00 loss: 0.71"
              for i, (d, b) in enumerate([(0.01, 0.4), (0.9, 1.3), (0.01, 0.4)], 30)),  # running averages
    "\n".join(f"Loaded: {6.5 + i / 10:.6f} seconds\n {i}: 2.31, 2.40 avg loss, 0.001000 rate, 8.21 seconds, 64 images"
              for i in range(1, 5)),  # darknet
]


@pytest.mark.parametrize("text", TIMERS, ids=["imagenet", "mmengine", "batch_data", "detectron2", "data_step",
                                               "fetch_compute", "data_load_ms", "wait_share", "one_line_said_slow",
                                               "batch_data_averages", "darknet_loaded"])
def test_a_loader_timer_that_dominates(text: str) -> None:
    assert first_id(text) == "data_starved"


# -- profilers ----------------------------------------------------------------------------------------------

TORCH_PROFILE = "\n".join([
    "-------------------------------------------------------  ------------  ------------  ------------  ------------",
    "                                                   Name    Self CPU %      Self CPU   CPU total %     CPU total",
    "-------------------------------------------------------  ------------  ------------  ------------  ------------",
    "enumerate(DataLoader)#_MultiProcessingDataLoaderIter...        61.20%        8.120s        62.10%        8.240s",
    "                                           aten::conv2d         0.10%      13.000ms        10.50%        1.393s",
    "                                       Optimizer.step#Adam.step         1.20%     159.000ms         5.10%     676.000ms",
])
LIGHTNING_PROFILE = "\n".join([
    "| Action                                        | Mean duration (s) | Num calls | Total time (s) | Percentage % |",
    "| Total                                         | -                 | 3120      | 720.1          | 100 %        |",
    "| [_TrainingEpochLoop].train_dataloader_next    | 0.51              | 1000      | 510.2          | 70.851       |",
    "| run_training_batch                            | 0.19              | 1000      | 190.1          | 26.398       |",
])
C_PROFILE = "\n".join([
    "         48213921 function calls (47001231 primitive calls) in 412.310 seconds",
    "",
    "   Ordered by: cumulative time",
    "",
    "   ncalls  tottime  percall  cumtime  percall filename:lineno(function)",
    "        1    0.020    0.020  412.310  412.310 train.py:1(<module>)",
    "     1001    0.110    0.000  301.502    0.301 dataloader.py:628(__next__)",
    "     1000    0.050    0.000   98.440    0.098 train.py:88(train_step)",
])


PY_SPY_TOP = "\n".join([
    "  %Own   %Total  OwnTime  TotalTime  Function (filename)",
    " 41.00%  41.00%   49.20s    49.20s   decode_jpeg (PIL/JpegImagePlugin.py)",
    "  2.00%  71.00%    2.40s    85.20s   __getitem__ (dataset.py)",
    "  0.50%  20.00%    0.60s    24.00s   forward (model.py)",
])
KEY_AVERAGES = "\n".join([
    "                         Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg    # of Calls",
    "      Dataset.__getitem__          55.10%       11.020s        55.10%       11.020s      11.020ms          1000",
    "          aten::convolution         0.20%      40.000ms        18.00%        3.600s       3.600ms          1000",
])


def line_profile(share: float) -> str:
    return "\n".join([
        "Total time: 120.5 s",
        "Line #      Hits         Time  Per Hit   % Time  Line Contents",
        "==============================================================",
        f"    40      1001   90412000.0  90321.7     {share:4.1f}      for batch in train_loader:",
        f"    41      1000   24100000.0  24100.0     {95 - share:4.1f}          loss = model(batch)",
    ])


@pytest.mark.parametrize("text", [TORCH_PROFILE, LIGHTNING_PROFILE, C_PROFILE, PY_SPY_TOP, KEY_AVERAGES, line_profile(75)],
                         ids=["torch", "lightning", "cprofile", "py_spy_top", "key_averages", "line_profiler"])
def test_a_profile_dominated_by_fetching_batches(text: str) -> None:
    assert first_id(text) == "data_starved"


@pytest.mark.parametrize("text", [line_profile(4), KEY_AVERAGES.replace("55.10%", " 3.10%"),
                                  'Traceback (most recent call last):\n  File "dataset.py", line 40, in __getitem__\n'
                                  "KeyError: 'label'"], ids=["line_profiler", "key_averages", "traceback"])
def test_a_profile_where_fetching_is_small(text: str) -> None:
    assert first_id(text) != "data_starved"


# -- the loaders' own warnings ------------------------------------------------------------------------------

WARNINGS = [
    "/usr/lib/python3.10/site-packages/torch/utils/data/dataloader.py:557: UserWarning: This DataLoader will create "
    "16 worker processes in total. Our suggested max number of worker in current system is 4, which is smaller than "
    "what this DataLoader is going to create. Please be aware that excessive worker creation might get DataLoader "
    "running slow or even freeze, lower the worker number to avoid potential slowness/freeze if necessary.",
    "PossibleUserWarning: The dataloader, train_dataloader 0, does not have many workers which may be a bottleneck. "
    "Consider increasing the value of the `num_workers` argument` (try 32 which is the number of cpus on this "
    "machine) in the `DataLoader` init to improve performance.",
    "UserWarning: The 'train_dataloader' does not have many workers which may be a bottleneck. Consider increasing "
    "the value of the `num_workers` argument` to `num_workers=7` in the `DataLoader` to improve performance.",
]


SHUFFLE = "\n".join(f"2024-02-01 10:00:{s:02d}.000000: I tensorflow/core/kernels/data/shuffle_dataset_op.cc:392] "
                    f"Filling up shuffle buffer (this may take a while): {n} of 10000" for s, n in ((10, 812), (20, 1630),
                                                                                                   (30, 2441)))
MEGATRON_INDEX = (" > elapsed time to build and save doc-idx mapping (seconds): 12.402\n"
                  " > elapsed time to build and save sample-idx mapping (seconds): 4012.311")


@pytest.mark.parametrize("text", [SHUFFLE, MEGATRON_INDEX], ids=["tf_shuffle_buffer", "megatron_index"])
def test_a_pipelines_own_report_of_its_wait(text: str) -> None:
    assert first_id(text) == "data_starved"


@pytest.mark.parametrize("text", ["\n".join(SHUFFLE.splitlines()[:1] + ["Shuffle buffer filled."]),
                                  " > elapsed time to build and save sample-idx mapping (seconds): 3.102"],
                         ids=["one_fill", "quick_index"])
def test_a_pipelines_short_wait_is_not_starvation(text: str) -> None:
    assert first_id(text) != "data_starved"


@pytest.mark.parametrize("line", WARNINGS, ids=["too_many", "few_old", "few_new"])
def test_the_loaders_own_warning(line: str) -> None:
    assert first_id(line) == "data_starved"


def test_the_battery_is_large() -> None:
    assert len(PROSE + CHINESE + RATES + TIMERS + WARNINGS) + 6 + 1 + 3 >= 60


FEEDING = [
    'The training seems to be CPU bound.',
    "My pipeline is I/O-bound, the GPU can't be kept busy.",
    'The bottleneck is the CPU, not the GPU.',
    "I think it's a CPU bottleneck.",
    'My GPU is not fully utilized.',
    "The GPU isn't being used fully during training.",
    'Task Manager shows GPU usage spiking up and down.',
    'GPU utilization in the wandb system charts is around 25%.',
    'The GPU Utilization panel in W&B shows a saw-tooth pattern dropping to 0 every few seconds.',
    "Increasing num_workers doesn't help, training is still slow.",
    'Data augmentation on the CPU is the bottleneck.',
    'The tokenizer is the bottleneck.',
    'Tokenization is the bottleneck of my training.',
    'The DataLoader hangs at the start of each epoch for a minute.',
    'Each step the GPU waits ~2 s for the loader.',
    'Our throughput is limited by the data pipeline.',
    'The training is IO bound because the images are on a HDD.',
    'Decoding the JPEGs takes most of the time.',
    'Image decoding on the CPU is too slow to keep up with the GPU.',
    'The CPU cannot feed the GPU fast enough.',
    "Data can't be loaded fast enough to keep the GPU busy.",
    'The GPU is starved for data.',
    "GPU starvation: the dataloader can't keep up.",
    "The loader can't keep up with the GPU.",
    'the dataloader is too slow to keep up',
    'We are data-loading bound.',
    'With 16 workers the CPU is pegged at 100% and the GPUs still wait.',
    'Training step time is dominated by data loading.',
    'The A100s are waiting on I/O most of the time.',
    'DataLoader is slow when reading from a mounted Google Drive in Colab.',
    'How can I speed up my dataloader? It takes longer than the forward pass.',
    'The forward pass takes 0.1 s but each batch takes 1.5 s to arrive.',
    "After every 10 iterations the training stalls for about 2 seconds.",
    "Every few batches there is a short freeze, which adds up over an epoch.",
    "On every 8th step I see a hiccup of ~3 s, the rest runs smoothly.",
    "The GPU has to wait a long time for the CPU in every iteration.",
    "The GPUs wait quite a while for data between steps.",
    "There is a big bottleneck while the images are being decoded.",
    "The bottleneck shows up when the batches are being loaded from disk.",
    "It gets slower and slower towards the end of the tokenization.",
    "Extremely slow during the preprocessing of the dataset.",
    "Training sometimes freezes for a few seconds and GPU util drops to 0% meanwhile.",
    "The code occasionally hangs at a step, all workers at 100% CPU and GPU utilization 0%.",
    "The first epoch takes 2 hours, later epochs only 10 minutes each.",
    "I have num_workers set to 0 because of Windows and the training is very slow.",
]
"""The feeder and its verdict, or the GPU and its wait, in many wordings."""
FEEDING_ZH = [
    'GPU 利用率 很低 而且 CPU 占用很高',
    '数据读取是瓶颈',
    '读取数据太慢，GPU 经常处于等待状态',
    'dataloader 很慢',
    "从 dataloader 取数据时快时慢",
    "每 20 个 batch 卡 10 秒左右",
    "数据放在 NAS 上，训练很慢",
    "GPU利用率基本是0",
    "数据 IO 是瓶颈",
    "训练的时候 CPU 成为瓶颈",
    "CPU 跟不上，显卡经常空转",
    '数据集 map 太慢了',
]


@pytest.mark.parametrize("text", FEEDING + FEEDING_ZH)
def test_the_feeding_said_too_slow(text: str) -> None:
    assert first_id(text) == "data_starved", text


NOT_FEEDING = [
    "Is data loading the bottleneck?",
    "The training is compute-bound, the GPU is at 100%.",
    "The kernel is memory-bound.",
    "My GPU is not used at all, everything runs on the CPU.",
    "The GPU isn't used: torch.cuda.is_available() returns False.",
    "We are limited by the CPU RAM when loading the model.",
    "The GPUs wait for each other at the all-reduce.",
    "Data can't be loaded: FileNotFoundError: data/train.jsonl",
    "Training on the 3090 is slower than on the A100.",
    "Loading the checkpoint files takes longer than the forward pass.",
]
IDLE_FOR_ANOTHER_REASON = [
    "My GPU is not utilized at all, everything runs on the CPU.",
    "GPU utilization is 0% because torch.cuda.is_available() returns False.",
    "Training runs on the CPU instead of the GPU, GPU usage is 0%.",
    "GPU usage 0%, the model is on device cpu.",
    "The GPU is not being used, nvidia-smi shows no processes and 0% util.",
    "GPU utilization is 0% after the process crashed.",
    "The training hangs at the first step, GPU util 0%, NCCL INFO lines then nothing.",
    "torch.cuda.is_available() returns False on my laptop.\nGPU usage is 0% and the CPU is at 100% while training.",
]
"""An idle GPU with its reason given: nothing runs on it (no CUDA, the CPU trains), the run crashed or hangs."""


@pytest.mark.parametrize("text", IDLE_FOR_ANOTHER_REASON)
def test_an_idle_gpu_with_another_reason_is_not_starvation(text: str) -> None:
    assert first_id(text) != "data_starved", text


def test_deepspeeds_cpu_offload_or_a_containers_empty_process_list_is_no_reason() -> None:
    text = "offload_optimizer:\n  device: cpu\nNo running processes found\nGPU utilization is only 10-20% during training."
    assert first_id(text) == "data_starved"


def test_a_pause_between_batches_still_counts_beside_a_hang_word() -> None:
    assert first_id("GPU util drops to 0% and the training hangs for 2 s every 10 steps.") == "data_starved"


@pytest.mark.parametrize("text", NOT_FEEDING)
def test_words_near_feeding_that_are_not_starvation(text: str) -> None:
    assert first_id(text) != "data_starved", text


# -- a feeder and slowness in one clause, in any order ------------------------------------------------------------

CLAUSES = [
    "We see stalls in the dataloader.",
    "Lag spikes that come from data loading.",
    "Our input pipeline gets stuck for seconds at a time.",
    "Things freeze while loading the next batch.",
    "数据加载这块经常卡住",
    "Decoding is painfully slow on this machine.",
    "num_workers=16 and it's still laggy.",
    "The HDD-based loading is painfully slow.",
    "With augmentations on, everything crawls.",
]
NOT_CLAUSES = [
    "The dataloader is fine, the model is slow.",
    "Data loading is fast but training is slow.",
    "Saving checkpoints to NFS is slow.",
    "Generation with the tokenizer is slow.",
    "Loading the model weights is slow.",
    "I/O errors on the disk, training stuck.",
    "The NCCL workers hang at the barrier.",
]


@pytest.mark.parametrize("text", CLAUSES)
def test_a_feeder_and_slowness_in_one_clause(text: str) -> None:
    assert first_id(text) == "data_starved", text


@pytest.mark.parametrize("text", NOT_CLAUSES)
def test_a_clause_that_is_fine_or_about_something_else(text: str) -> None:
    assert first_id(text) != "data_starved", text


# -- a stack caught waiting for data ---------------------------------------------------------------------------

def frames(*where: tuple[str, int, str]) -> list[str]:
    return [f'  File "{path}", line {n}, in {name}' for path, n, name in where]


LOADER = "/usr/lib/python3.10/site-packages/torch/utils/data/dataloader.py"
INTERRUPTED_IN_LOADER = "\n".join(["^CTraceback (most recent call last):", *frames(
    ("train.py", 120, "<module>"), (LOADER, 630, "__next__"), (LOADER, 1328, "_next_data"), (LOADER, 1294, "_get_data"),
    (LOADER, 1132, "_try_get_data"), ("/usr/lib/python3.10/queue.py", 180, "get"),
    ("/usr/lib/python3.10/threading.py", 324, "wait")), "KeyboardInterrupt"])
INTERRUPTED_IN_MAP = "\n".join(["Traceback (most recent call last):", *frames(
    ("sft.py", 88, "<module>"), ("/opt/conda/lib/python3.11/site-packages/datasets/arrow_dataset.py", 3055, "map"),
    ("/opt/conda/lib/python3.11/site-packages/datasets/arrow_dataset.py", 3458, "_map_single"),
    ("/opt/conda/lib/python3.11/site-packages/transformers/tokenization_utils_base.py", 2858, "__call__")),
    "KeyboardInterrupt"])
PY_SPY = "\n".join([
    "Process 4321: python train.py --config lora.yaml",
    "Python v3.10.12 (/usr/bin/python3.10)",
    "",
    'Thread 4321 (idle): "MainThread"',
    "    wait (threading.py:324)",
    "    get (queue.py:180)",
    "    _try_get_data (torch/utils/data/dataloader.py:1133)",
    "    _get_data (torch/utils/data/dataloader.py:1295)",
    "    _next_data (torch/utils/data/dataloader.py:1329)",
    "    __next__ (torch/utils/data/dataloader.py:631)",
    "    train_one_epoch (engine.py:54)",
])
FAULTHANDLER = "\n".join([
    "Timeout (0:10:00)!",
    "Thread 0x00007f3b2c9ff700 (most recent call first):",
    '  File "/usr/lib/python3.8/threading.py", line 306 in wait',
    '  File "/opt/venv/lib/python3.8/site-packages/torch/utils/data/dataloader.py", line 1011 in _try_get_data',
    '  File "/opt/venv/lib/python3.8/site-packages/torch/utils/data/dataloader.py", line 1163 in _get_data',
])


@pytest.mark.parametrize("text", [INTERRUPTED_IN_LOADER, INTERRUPTED_IN_MAP, PY_SPY, FAULTHANDLER],
                         ids=["ctrl_c_loader", "ctrl_c_map", "py_spy", "faulthandler"])
def test_a_stack_caught_waiting_for_data(text: str) -> None:
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    assert items[0].id == "data_starved" and "caught" in items[0].title


INTERRUPTED_IN_STEP = "\n".join(["Traceback (most recent call last):", *frames(
    ("train.py", 131, "<module>"), ("/usr/lib/python3.10/site-packages/torch/_tensor.py", 522, "backward"),
    ("/usr/lib/python3.10/site-packages/torch/autograd/__init__.py", 266, "backward")), "KeyboardInterrupt"])
WORKER_ERROR = "\n".join(["Traceback (most recent call last):", *frames(
    ("train.py", 120, "<module>"), (LOADER, 630, "__next__"), (LOADER, 1345, "_next_data"),
    (LOADER, 1371, "_process_data"), ("/usr/lib/python3.10/site-packages/torch/_utils.py", 694, "reraise")),
    "ValueError: Caught ValueError in DataLoader worker process 0.",
    "Original Traceback (most recent call last):",
    "ValueError: too many values to unpack (expected 2)"])


@pytest.mark.parametrize("text", [INTERRUPTED_IN_STEP, WORKER_ERROR], ids=["ctrl_c_in_backward", "worker_error"])
def test_a_stack_elsewhere_is_not_waiting_for_data(text: str) -> None:
    assert first_id(text) != "data_starved"


# -- negatives ----------------------------------------------------------------------------------------------

TRAINING = "\n".join(f"{{'loss': {2.0 - i * 0.1:.4f}, 'grad_norm': 1.1, 'learning_rate': 2e-05, 'epoch': {i / 10}}}"
                     for i in range(1, 8))
NOT_STARVED = [
    smi([95, 98, 97, 100]),  # a busy run
    "GPU utilization is at 95-100% the whole time, memory 70 GB of 80 GB.",
    "\n".join(["  0%|          | 1/1000 [00:45<12:29:15, 45.01s/it]"]  # the first step compiles, then it runs
              + [f"  {i // 10}%|▏ | {i}/1000 [00:{45 + i // 3:02d}<06:00,  2.7{i % 10}it/s]" for i in range(2, 30)]),
    "What value should I use for dataloader_num_workers? Does it matter for LoRA fine-tuning?",
    "Evaluation is much slower than training, every eval takes 20 minutes.",
    "Map (num_proc=8): 100%|██████████| 1000000/1000000 [02:10<00:00, 7692.31 examples/s]",
    "Map: 100%|██████████| 5000/5000 [00:02<00:00, 2100.50 examples/s]\n" + TRAINING,
    "\n".join(f"Epoch(train)  [1][{i}/1000]  lr: 1.0000e-04  eta: 1:00:00  time: 0.5200  data_time: 0.0100  "
              f"memory: 8000  loss: 2.3{i // 50}" for i in (50, 100, 150)),
    "GPU memory usage is low (2 GB of 24 GB) but the loss is fine.",
    "The A100 only used 30% of its memory, can I raise the batch size?",
    "GPU memory at 10%, utilization at 98%.",
    "nvidia-smi shows 95% util on all 8 GPUs.",
    "nvidia-smi shows 97% while training.",
    "Map:   1%|          | 1000/100000 [00:05<08:15, 200.00 examples/s]",  # under ten minutes in all
    "Map: 100% 52002/52002 [00:21<00:00, 2431.07 examples/s]",  # a notebook's widget, quick
    "CPU at 15% usage, GPU at 99%.",
    "\n".join(f"system/gpu.0.gpu: {u}" for u in (97.5, 99.0, 93.1, 100.0, 98.2)),
    "\n".join(f"0, {u} %, 21344 MiB" for u in (97, 99, 94, 100, 98)),
    "\n".join(f"system/gpu.0.memory: {u}" for u in (2.0, 1.0, 3.0, 0.0, 1.0)),  # memory's, not the GPU's
    "Training runs at 8 it/s but evaluation at 1 it/s with 4 workers.",
    "On dataset A I get 5 it/s, on dataset B with longer sequences 1 it/s.",
    "Loading the checkpoint files is really slow from the network drive.",
    "The first step takes 60 s (torch.compile), then 0.2 s/step.",
    "2024-01-05 10:00:00 - INFO - Epoch [1][40/5000]  lr: 0.01, eta: 4:00:00, time: 1.120, data_time: 0.503, "
    "memory: 6100, loss: 5.9",  # one line, nobody says it is slow
    "Every 500 steps the training pauses to save a checkpoint.",
    "The first epoch took 41 minutes and the second epoch 39 minutes.",
    "The first epoch takes 10 minutes, later epochs take 60 minutes as the sequences grow.",
    "Downloading data: 45%|████▌     | 4.5G/10.0G [30:00<36:40, 2.5MB/s]",
    "WARNING:tensorflow:Callback method `on_train_batch_end` is slow compared to the batch time (batch time: 0.0100s "
    "vs `on_train_batch_end` time: 0.2000s). Check your callbacks.",
    "Saving the dataset (8/8 shards): 100%|██████████| 1000000/1000000 [00:40<00:00, 24837.26 examples/s]",
    "\n".join(f"epoch 0 step {i}: throughput 812.1 samples/s, dataloader wait {2.2 - i / 10:.1f}%" for i in range(3)),
    "\n".join(f"Loaded: {0.000041 + i / 1e6:.6f} seconds\n {i}: 2.31, 2.40 avg loss, 0.001000 rate, 1.21 seconds, 64 images"
              for i in range(1, 5)),  # darknet, fed
    "\n".join(f"Epoch(train)  [1][{(i + 1) * 50:4d}/7330]  lr: 2.0000e-02  time: {t:.4f}  data_time: {d:.4f}  loss: "
              f"{2.3 - 0.05 * i:.4f}" for i, (t, d) in enumerate([(2.9, 2.5), (0.512, 0.0101), (0.509, 0.0098),
                                                                    (0.5102, 0.0093)])),  # the workers' start-up
    "Training is slow because the model is big: 70B in 4-bit on one 24 GB card, 40 s per step, GPU at 100%.",
    "How can I make tokenization faster? It is fine now but I plan to use a larger dataset.",
    TRAINING,
]


@pytest.mark.parametrize("text", NOT_STARVED)
def test_not_starved(text: str) -> None:
    assert first_id(text) != "data_starved", text


CRASHED = "\n".join([
    "After the crash nvidia-smi shows GPU utilization 0%.",
    "Traceback (most recent call last):",
    '  File "train.py", line 88, in <module>',
    "    trainer.train()",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.64 GiB "
    "of which 1.02 GiB is free. Of the allocated memory 21.80 GiB is allocated by PyTorch, and 312.00 MiB is reserved "
    "by PyTorch but unallocated.",
])
WORKER_KILLED = "\n".join([
    "GPU utilization dropped to 0 and then:",
    "RuntimeError: DataLoader worker (pid 28841) is killed by signal: Bus error. It is possible that dataloader's "
    "workers are out of shared memory. Please try to raise your shared memory limit.",
])


@pytest.mark.parametrize("text", [CRASHED, WORKER_KILLED], ids=["oom", "worker_killed"])
def test_a_gpu_idle_because_the_run_crashed_names_the_crash(text: str) -> None:
    assert first_id(text) != "data_starved"


@pytest.mark.parametrize("text", [
    # transformers#5944 (wave 22's dev half), its sentence: a dataset's constructor reads and tokenises the whole file
    "it works fine for small files but for file > 600 MB the process gets stuck at dataset = "
    "LineByLineTextDataset(tokenizer=tokenizer,file_path=DATA_FILE,block_size=64)",
    "with the full corpus the run is stuck at loading the dataset for two hours",
])
def test_a_run_stuck_at_building_or_loading_its_dataset_waits_on_its_data(text: str) -> None:
    assert first_id(text) == "data_starved"


def test_a_dataset_card_named_is_no_preparation() -> None:
    assert first_id("the page is stuck at the Dataset card viewer") != "data_starved"
