"""Issue 23: data starvation read from MEASURES, the way a maintainer reads them, in any wording: a step's time
split into the wait for the batch and the model's work (the user's own timing, in English or Chinese, the parts in
any order). Built from the pattern, not from a corpus excerpt; models, numbers and phrasings vary. Negatives: a
loader that is a small part of the step, the model's or a checkpoint's load, an evaluation, an epoch's time,
a program's per-iteration timer (read over many lines elsewhere: its first line may be the loader's warm-up)."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream
from loratui.logic.advisor.starve_timed import timed_parts


def first(text: str):
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return items[0] if items else None


TIMED = [
    "data loading time: 2.5 s, model forward/backward time: 0.3 s",
    "I measured it: loading a batch 0.9 s, the training step 0.2 s.",
    "forward takes 80ms but getting the next batch takes 400ms",
    "Per iteration: data loading takes 1.8s while forward+backward takes 0.25s",
    "each iteration takes 1.2 s, of which 0.8 s is spent on data loading",
    "time per batch 0.6 s; reading the images 0.4 s",
    "After adding timers: fetch 350 ms, fwd 120 ms, bwd 240 ms, optimizer 30 ms.",
    "decoding the video clips takes 3 seconds and the model step only 0.5 seconds",
    "数据加载耗时 2 秒，前向传播 0.1 秒",
    "I wrapped the loop with time.time(): next batch 1.05 s vs training step 0.31 s on the RTX 4090",
]


@pytest.mark.parametrize("line", TIMED)
def test_a_step_timed_with_the_data_a_third_or_more_is_starved(line: str) -> None:
    item = first(line + "\n")
    assert item is not None and item.id == "data_starved" and "as timed" in item.title


FED = [
    "I timed data loading at 0.02 s and the forward+backward at 0.35 s, so the loader is fine",
    "data: 0.01 s, forward: 0.2 s, backward: 0.3 s",
    "model loading took 120 s and a training step takes 0.5 s",
    "loading the checkpoint took 45 s, forward 0.1 s",
    "eval takes 30 s, the train step 0.2 s",
    "the first epoch took 2 hours, each step 0.3 s",
    "Speed: 0.5s/it, data 0.1 s",
    "tokenizer load 3 s, generation 12 s",
]


@pytest.mark.parametrize("line", FED)
def test_a_small_data_part_or_another_wait_is_no_timed_starvation(line: str) -> None:
    assert timed_parts(line) is None


def test_a_programs_timer_is_not_judged_by_its_first_line() -> None:
    """The first iteration waits for the workers to start; the meter over many lines judges the loader."""
    text = "iter 1: data 4.10 s, forward 0.20 s\n" + "".join(
        f"iter {i}: data 0.01 s, forward 0.20 s\n" for i in range(2, 12))
    item = first(text)
    assert item is None or item.id != "data_starved"


def test_healthy_prose_with_timings_is_no_starvation() -> None:
    text = ("Fine-tuning llama-3-8b with QLoRA on one A100.\n"
            "Each step takes about 1.4 s and an evaluation 40 s; saving a checkpoint takes 12 s.\n"
            "{'loss': 1.82, 'learning_rate': 0.0002, 'epoch': 0.1}\n"
            "{'loss': 1.61, 'learning_rate': 0.00019, 'epoch': 0.2}\n")
    item = first(text)
    assert item is None or item.id != "data_starved"


# -- a data-preparation bar of any pipeline, by its elapsed and remaining time --------------------------------

PREPARING = [
    "train: Scanning '/data/coco/labels/train2017' images and labels... 118287 found, 0 missing: 12%|█▏ | "
    "14200/118287 [04:12<30:51, 56.2it/s]",
    "Caching images (18.3GB ram):  35%|███▌      | 41400/118287 [09:10<17:02, 75.2it/s]",
    "Extracting features: 5%|▌ | 500/10000 [10:00<3:10:00, 0.83it/s]",
    "Decoding audio clips: 20%|██ | 2000/10000 [06:00<24:00, 5.55it/s]",
    "Building index: 60%|██████ | 600/1000 [15:00<10:00, 0.67it/s]",
    "Tokenizing eval dataset: 40%|████ | 40000/100000 [08:00<12:00, 83.3it/s]",
]


@pytest.mark.parametrize("line", PREPARING)
def test_a_long_data_preparation_bar_of_any_pipeline_is_starved(line: str) -> None:
    item = first(line + "\n")
    assert item is not None and item.id == "data_starved" and "preprocessing takes about" in item.title


def test_an_image_pipelines_bar_is_told_to_cache_not_to_tokenise() -> None:
    item = first(PREPARING[1] + "\n")
    assert "tokenise" not in item.title and "prepare the data once" in item.title


OTHER_BARS = [
    "Loading checkpoint shards: 100%|██████████| 4/4 [12:00<00:00, 180.00s/it]",
    "Downloading data: 100%|██████████| 50/50 [30:00<00:00, 36.00s/it]",
    "Evaluating: 100%|██████████| 5000/5000 [25:00<00:00, 3.33it/s]",
    "Resolving data files: 100%|██████████| 50000/50000 [10:24<00:00, 80.1it/s]",
    "Saving model checkpoint: 100%|██████████| 3/3 [11:00<00:00, 220.0s/it]",
    "train: Scanning '/data/labels/train' images and labels... 5000 found, 0 missing: 100%|██████████| "
    "5000/5000 [00:04<00:00, 1203.5it/s]",
]


@pytest.mark.parametrize("line", OTHER_BARS)
def test_a_models_download_evaluation_or_quick_scan_bar_is_no_preparation(line: str) -> None:
    item = first(line + "\n")
    assert item is None or item.id != "data_starved"


# -- a program's timers under keys of any naming ------------------------------------------------------------

KEYED = {
    "slash": "step {i} | loss {l:.3f} | time/data {d:.3f} | time/batch {b:.3f}",
    "dict": "{{'train/loss': {l:.3f}, 'time/data': {d:.3f}, 'time/step': {b:.3f}}}",
    "t_prefix": "Epoch 1 [{i}/500] t_data: {d:.3f} t_iter: {b:.3f} loss {l:.3f}",
    "ms_keys": "step={i} loss={l:.3f} fetch_ms={dm:.0f} step_ms={bm:.0f}",
}


def timed_log(layout: str, data: float, step: float) -> str:
    return "".join(layout.format(i=10 * i, l=2.0 - i / 100, d=data, b=step, dm=1000 * data, bm=1000 * step) + "\n"
                   for i in range(1, 9))


@pytest.mark.parametrize("layout", KEYED.values(), ids=KEYED.keys())
def test_a_programs_data_timer_under_any_key_is_read(layout: str) -> None:
    item = first(timed_log(layout, 0.9, 1.2))
    assert item is not None and item.id == "data_starved" and "waits for data" in item.title


@pytest.mark.parametrize("layout", KEYED.values(), ids=KEYED.keys())
def test_a_fed_loader_under_any_key_is_no_starvation(layout: str) -> None:
    item = first(timed_log(layout, 0.004, 1.2))
    assert item is None or item.id != "data_starved"


def test_an_evaluations_timer_is_no_step() -> None:
    text = "".join(f"epoch {i} eval_time: 30.0 data_time: 0.2 loss {1.5 - i / 10:.2f}\n" for i in range(1, 6))
    item = first(text)
    assert item is None or item.id != "data_starved"


# -- the words, when there is no measure: general vocabulary ------------------------------------------------

WORDS = [
    "It seems that the data loading is very time-consuming.",
    "Why is training so slow? It takes 1 hour per epoch with 100k images, the GPU is barely used.",
    "My two A6000s are hardly utilized while the script runs.",
    "每个epoch的开始都要等很久才开始训练",
    "The first few iterations are fast, then every ~16 iterations it stalls for several seconds (num_workers=16).",
    "Using lazy loading of the h5 files made each epoch take 3x longer.",
    "Decoding the JPEGs on the fly makes every epoch 4 times slower than with the cached tensors.",
]


@pytest.mark.parametrize("line", WORDS)
def test_general_words_of_a_starved_gpu(line: str) -> None:
    item = first(line + "\n")
    assert item is not None and item.id == "data_starved"


OTHER_WORDS = [
    "Training became 3x slower after I upgraded transformers to 4.40.",
    "With gradient checkpointing each epoch takes 3x longer, which is expected.",
    "Loading the model takes 5x longer from the network drive.",
    "The evaluation on the test images is 4x slower than training.",
    "The GPU is barely warm, temps fine. Training loss goes down nicely.",
    "每个epoch结束后保存模型要等很久",
    "It seems that the checkpoint loading is very time-consuming.",
]


@pytest.mark.parametrize("line", OTHER_WORDS)
def test_other_slowness_is_no_starvation(line: str) -> None:
    item = first(line + "\n")
    assert item is None or item.id != "data_starved"


# -- a training bar that slows for good, from a few pasted redraws ------------------------------------------------

def bar_lines(rates: list[float], desc: str = "") -> str:
    return "".join(f"{desc}{10 * (i + 1) // 10}%|█         | {10 * (i + 1)}/1000 [01:{i:02d}<20:00, {r:.2f}it/s]\n"
                   for i, r in enumerate(rates))


def test_a_few_redraws_of_a_bar_that_slowed_for_good() -> None:
    item = first(bar_lines([3.1, 3.0, 2.9, 1.0, 0.9, 0.8]))
    assert item is not None and item.id == "data_starved" and "slowed from" in item.title


@pytest.mark.parametrize("rates", [
    [0.5, 1.0, 2.0, 3.0, 3.0, 3.1],  # the warm-up: it speeds up
    [3.0, 2.6, 3.1, 2.8, 2.9, 3.0],  # steady, with noise
    [3.1, 3.0, 2.9, 1.0, 0.9],  # too few after the first to tell
])
def test_a_bar_that_speeds_up_or_holds_is_no_slowdown(rates: list[float]) -> None:
    item = first(bar_lines(rates))
    assert item is None or item.id != "data_starved"


def test_a_slowdown_just_after_an_evaluation_is_the_evaluations() -> None:
    text = bar_lines([3.1, 3.0, 2.9]) + "***** Running Evaluation *****\n" + bar_lines([1.0, 0.9, 0.8])
    item = first(text)
    assert item is None or item.id != "data_starved"


# -- time lost to the feed, the workers started again every epoch --------------------------------------------------

@pytest.mark.parametrize("line", [
    # https://github.com/boreshkinai/delta-interpolator/pull/3 (dev-learn)
    "You lose around 10 seconds because of the worker reset at the start of each epoch.",
    "The DataLoader workers are re-created at the beginning of every epoch, which takes ~20 s with 16 workers.",
    "Every epoch the workers get respawned and the GPU sits idle meanwhile.",
    "We waste about 5 s per batch waiting for the loader.",
])
def test_time_lost_to_the_feed(line: str) -> None:
    item = first(line + "\n")
    assert item is not None and item.id == "data_starved"


@pytest.mark.parametrize("line", [
    "I lost 3 hours of training because the job crashed at epoch 4.",
    "We lose 2 minutes every epoch to evaluation.",
    "The learning rate scheduler resets every epoch.",
])
def test_time_lost_to_other_work_is_no_starvation(line: str) -> None:
    item = first(line + "\n")
    assert item is None or item.id != "data_starved"


# -- measured in prose: the idle share, a speed-up from the feed ----------------------------------------------------

@pytest.mark.parametrize("line", [
    "It trains at 425 sample/s with the GPU idle 63% of the time.",
    "The GPU spends 70% of its time idle.",
    "I got a 10X performance increase by setting `dataloader_num_workers` to 16.",
    "Setting pin_memory=True and persistent_workers=True made it 3x faster.",
    "After moving the dataset from NFS to local NVMe the epoch time went from 50 min to 12 min.",
    "Pre-tokenizing the corpus gave a 4x speedup of the training loop.",
])
def test_a_measured_idle_share_or_feed_speedup_is_starved(line: str) -> None:
    item = first(line + "\n")
    assert item is not None and item.id == "data_starved"


@pytest.mark.parametrize("line", [
    "The GPU is idle 5% of the time, which is fine.",
    "Flash attention made it 3x faster.",
    "Switching to bf16 gave a 2x speedup with 8 workers on the node.",
    "Loading the model from local NVMe took from 10 min to 2 min.",
    "More workers made no 2x difference at all, it is not faster.",
])
def test_a_small_idle_share_or_another_speedup_is_no_starvation(line: str) -> None:
    item = first(line + "\n")
    assert item is None or item.id != "data_starved"


def test_a_stop_kept_away_is_no_reason_for_the_idle_gpu() -> None:
    item = first("I reduced the batch size to 4 to avoid OOM, and now the GPU utilization is only 20% and training "
                 "is very slow.\n")
    assert item is not None and item.id == "data_starved"


def test_a_crash_is_still_the_idle_gpus_reason() -> None:
    item = first("After the OOM crash the GPU utilization is 0% and nothing runs.\n")
    assert item is None or item.id != "data_starved"


# -- the feed asked to be faster, or a streamed or lazily read source called slow --------------------------------

@pytest.mark.parametrize("line", [
    "How can I speed up data loading? My epochs take forever.",
    "Is there a way to make the dataloader faster?",
    "Slow training with IterableDataset and streaming=True",
    "Training speed is slow when using a streaming dataset from the hub.",
    "Training is slow due to the heavy transforms in my dataset class.",
    "请问怎么加速数据加载？",
])
def test_the_feed_said_slow_or_asked_faster(line: str) -> None:
    item = first(line + "\n")
    assert item is not None and item.id == "data_starved"


@pytest.mark.parametrize("line", [
    "How do I speed up the model's forward pass?",
    "How can I speed up training? I use 4 GPUs with deepspeed zero3.",
    "Loading the dataset with streaming is fast, training is fine too.",
    "Slow inference with the streaming API.",
])
def test_other_speed_questions_are_no_starvation(line: str) -> None:
    item = first(line + "\n")
    assert item is None or item.id != "data_starved"
