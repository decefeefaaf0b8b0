"""The advisor: one row per symptom over synthetic event sequences, no false alarms, replay equals live."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loratui import events
from loratui.eventlog import read_log
from loratui.logic.advisor import IDS, Advice, Advisor
from loratui.recipe import (
    DataSection,
    LoraSection,
    ModelSection,
    QuantizationSection,
    Recipe,
    TrainingSection,
    load_recipe,
)

GIB, MIB = 1 << 30, 1 << 20
REPO = Path(__file__).resolve().parents[1]


def recipe(training: dict[str, Any] | None = None, lora: dict[str, Any] | None = None,
           quantization: dict[str, Any] | None = None, data: dict[str, Any] | None = None) -> Recipe:
    """A recipe with the given overrides on top of the defaults."""
    return Recipe(model=ModelSection(path="/models/qwen-7b"), training=TrainingSection(**(training or {})),
                  lora=LoraSection(**(lora or {})), quantization=QuantizationSection(**(quantization or {})),
                  data=DataSection(path="train.jsonl", **(data or {})))


def run(steps: int = 60, *, interval: float = 1.0, step_time: float = 0.95, used: Callable[[int], int] | None = None,
        util: int | None = 95, total: int = 40 * GIB, allocated: Callable[[int], int] | None = None,
        loss: Callable[[int], float | str] | None = None, grad: Callable[[int], float | str] | None = None,
        lr: float = 2e-4, name: str = "NVIDIA A100-SXM4-40GB", extra_gpu: int | None = None,
        per_step: int = 10) -> list[Any]:
    """A training run of `steps` steps: samples every 1/per_step of a step, then the step and its log."""
    used = used or (lambda i: 20 * GIB)
    allocated = allocated or (lambda i: 10 * GIB)
    loss = loss or (lambda i: 2.0 - 0.01 * i)
    grad = grad or (lambda i: 0.5)
    found: list[Any] = [
        events.Header(t=0.0, schema=1, run_id="r", recipe_hash="h"),
        events.GpuInfo(t=0.0, available=True, names=[name], totals=[total], indices=[0]),
        events.State(t=0.0, state="loading"),
        events.TrainBegin(t=1.0, max_steps=steps, num_epochs=1.0),
        events.Phase(t=1.0, name="train", edge="begin"),
        events.State(t=1.0, state="training"),
    ]
    t = 1.0
    for i in range(1, steps + 1):
        for k in range(per_step):
            t += interval / per_step
            found.append(sample(t, used(i), util, total))
            if extra_gpu is not None:
                found.append(events.Sample(t=t, gpu=1, used_max=extra_gpu, used_last=extra_gpu, used_min=0,
                                           total=total, util=100, procs={"999": extra_gpu}))
        found.append(events.Step(t=t, step=i, epoch=i / steps, step_time=step_time, tokens=4096,
                                 torch_allocated=allocated(i), torch_reserved=allocated(i) + GIB,
                                 peak_allocated=used(i) - 2 * GIB, peak_reserved=used(i) - GIB))
        found.append(events.Log(t=t, step=i, values={"loss": loss(i), "grad_norm": grad(i), "learning_rate": lr}))
    return found


def sample(t: float, used: int, util: int | None = 95, total: int = 40 * GIB, procs: dict[str, int] | None = None,
           gpu: int = 0) -> events.Sample:
    """One window of GPU 0 with the run's pid 100 on it."""
    procs = procs if procs is not None else {"100": used}
    return events.Sample(t=t, gpu=gpu, used_max=used, used_last=used, used_min=used, total=total, util=util,
                         procs=procs, run_pids=[100])


def output(*lines: str, t: float = 1e6) -> events.Output:
    return events.Output(t=t, stream="stderr", lines=list(lines))


def phase(name: str, edge: str, step: int, t: float) -> events.Phase:
    return events.Phase(t=t, name=name, edge=edge, step=step)


def end(t: float = 2e6) -> events.End:
    return events.End(t=t, state="failed", exit_code=1)


OLD_OOM = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 172.00 MiB (GPU 0; 23.69 GiB total "
           "capacity; 22.71 GiB already allocated; 87.06 MiB free; 23.08 GiB reserved in total by PyTorch)")
FRAG_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.64 GiB. GPU 0 has a total capacity of "
            "79.10 GiB of which 2.19 GiB is free. Including non-PyTorch memory, this process has 76.90 GiB memory "
            "in use. Of the allocated memory 63.42 GiB is allocated by PyTorch, and 12.81 GiB is reserved by "
            "PyTorch but unallocated.")
EVAL_OOM = FRAG_OOM.replace("12.81 GiB is reserved", "0.21 GiB is reserved")
LOG_TAIL = run(40)[-1].t


def _over_line(i: int) -> int:
    return 31 * GIB if i > 20 else 20 * GIB


def _oom_with_neighbour() -> list[Any]:
    found = run(20)
    found.append(sample(found[-1].t + 0.1, 39 * GIB, procs={"100": 23 * GIB, "4711": 16 * GIB}))
    return found + [output("RuntimeError: CUDA error: out of memory"), end()]


def _eval_jump() -> list[Any]:
    found = run(30, used=lambda i: 25 * GIB)
    t = found[-1].t
    found.append(phase("eval", "begin", 30, t))
    found += [sample(t + 0.1 * k, 31 * GIB) for k in range(1, 6)]
    return found + [phase("eval", "end", 30, t + 1)]


def _starved(util: int, step_time: float) -> list[Any]:
    return run(60, util=util, step_time=step_time)


SYMPTOMS = [
    # (row name, events, recipe, expected id, expected severity, expected change (subset))
    ("vram over line, batch 4", run(40, used=_over_line), recipe({"per_device_train_batch_size": 4,
     "gradient_accumulation_steps": 4}), "vram_near_limit", "warning",
     {"training.per_device_train_batch_size": 2, "training.gradient_accumulation_steps": 8}),
    ("vram over line, odd batch 3", run(40, used=_over_line), recipe({"per_device_train_batch_size": 3}),
     "vram_near_limit", "warning",
     {"training.per_device_train_batch_size": 1, "training.gradient_accumulation_steps": 3}),
    ("vram over line, batch 1", run(40, used=_over_line), recipe(), "vram_near_limit", "warning",
     {"training.gradient_checkpointing": True}),
    ("vram over line, checkpointing on", run(40, used=_over_line),
     recipe({"gradient_checkpointing": True}, data={"max_length": 2048}), "vram_near_limit", "warning",
     {"data.max_length": 1024}),
    ("vram over line, short samples", run(40, used=_over_line),
     recipe({"gradient_checkpointing": True}, data={"max_length": 512}), "vram_near_limit", "warning",
     {"quantization.load_in_4bit": True, "quantization.bnb_4bit_compute_dtype": "bfloat16"}),
    ("vram at the card's edge", run(40, used=lambda i: 39 * GIB), recipe({"per_device_train_batch_size": 2}),
     "vram_near_limit", "error", {"training.per_device_train_batch_size": 1}),
    ("oom full", run(20) + [output(OLD_OOM), end()], recipe({"per_device_train_batch_size": 8}), "oom_full",
     "error", {"training.per_device_train_batch_size": 4, "training.gradient_accumulation_steps": 2}),
    ("oom fragmentation", run(20) + [output(FRAG_OOM)], recipe(), "oom_fragmentation", "error",
     {"env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
    ("oom other process (NVML)", _oom_with_neighbour(), recipe(), "oom_other_process", "error", {}),
    ("oom at eval", run(20) + [phase("eval", "begin", 20, LOG_TAIL), output(EVAL_OOM)],
     recipe({"per_device_eval_batch_size": 4}), "oom_at_eval", "error",
     {"training.per_device_eval_batch_size": 2}),
    ("oom at eval, eval batch 1", run(20) + [phase("eval", "begin", 20, LOG_TAIL), output(EVAL_OOM)],
     recipe(), "oom_at_eval", "error", {"training.eval_accumulation_steps": 1}),
    ("oom at save", run(20) + [phase("save", "begin", 20, LOG_TAIL), output(OLD_OOM)], recipe(), "oom_at_save",
     "error", {"training.save_only_model": True}),
    ("oom while loading", [events.State(t=0, state="loading"), output(OLD_OOM), end()], recipe(), "oom_full",
     "error", {"quantization.load_in_4bit": True}),
    ("oom in End.error only", run(10) + [events.End(t=2e6, state="failed", exit_code=1, error=FRAG_OOM)],
     recipe(), "oom_fragmentation", "error", {"env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
    ("eval jumps over the line", _eval_jump(), recipe({"per_device_eval_batch_size": 8}), "oom_at_eval",
     "warning", {"training.per_device_eval_batch_size": 4}),
    ("nan with paged 8-bit", run(30, loss=lambda i: "NaN" if i >= 25 else 1.0), recipe({"optim": "paged_adamw_8bit",
     "gradient_checkpointing": True}), "nan_loss", "error", {"training.optim": "adamw_torch"}),
    ("nan with fp16 on an A100", run(30, loss=lambda i: "NaN" if i >= 25 else 1.0), recipe({"fp16": True}),
     "nan_loss", "error", {"training.fp16": False, "training.bf16": True}),
    ("nan with fp16 on a V100", run(30, loss=lambda i: "NaN" if i >= 25 else 1.0, name="Tesla V100-SXM2-32GB"),
     recipe({"fp16": True, "learning_rate": 3e-4}), "nan_loss", "error", {"training.learning_rate": 1e-4}),
    ("inf grad norm in bf16", run(30, grad=lambda i: "Infinity" if i == 12 else 0.5), recipe({"bf16": True}),
     "nan_loss", "error", {"training.learning_rate": 6.7e-5}),
    ("loss flat", run(60, loss=lambda i: 2.3 + 0.001 * (i % 3)), recipe(), "loss_flat", "warning", {}),
    ("loss near zero", run(60, loss=lambda i: 0.01), recipe(), "loss_flat", "warning", {}),
    ("loss exactly zero", run(60, loss=lambda i: 0.0), recipe(), "loss_zero", "warning", {}),
    ("loss collapses to zero", run(60, loss=lambda i: 1.6 if i < 3 else 0.0), recipe(), "loss_zero", "warning", {}),
    ("grad norm zero", run(60, grad=lambda i: 0.0), recipe(), "loss_flat", "warning", {}),
    ("loss diverging", run(80, loss=lambda i: 2.0 - 0.01 * i if i < 40 else 1.6 + 0.1 * (i - 40)),
     recipe({"learning_rate": 2e-4}), "loss_diverging", "warning", {"training.learning_rate": 6.7e-5}),
    ("loss diverging, alpha 8x r", run(80, loss=lambda i: 2.0 - 0.01 * i if i < 40 else 1.6 + 0.1 * (i - 40)),
     recipe(lora={"r": 16, "lora_alpha": 128}), "loss_diverging", "warning", {"lora.lora_alpha": 32}),
    ("data starved", _starved(30, 0.3), recipe(), "data_starved", "info", {"training.dataloader_num_workers": 4}),
    ("data starved, 4 workers", _starved(30, 0.3), recipe({"dataloader_num_workers": 4}), "data_starved", "info",
     {"training.dataloader_num_workers": 8}),
    ("memory leak", run(80, allocated=lambda i: 10 * GIB + i * 8 * MIB), recipe(), "memory_leak", "warning", {}),
    ("bitsandbytes without GPU", [output("UserWarning: The installed version of bitsandbytes was compiled without "
     "GPU support. 8-bit optimizers and GPU quantization are unavailable.")], recipe(), "bnb_setup", "error", {}),
    ("flash-attn missing", [output("ImportError: FlashAttention2 has been toggled on, but it cannot be used due to "
     "the following error: the package flash_attn seems to be not installed.")],
     Recipe(model=ModelSection(path="m", attn_implementation="flash_attention_2")), "flash_attn_unavailable",
     "error", {"model.attn_implementation": "sdpa"}),
    ("illegal memory access", [output("[rank0]: RuntimeError: CUDA error: an illegal memory access was "
     "encountered")], recipe(), "cuda_error", "error", {"env.CUDA_LAUNCH_BLOCKING": "1"}),
    ("device-side assert", [output("RuntimeError: CUDA error: device-side assert triggered")], None, "cuda_error",
     "error", {"env.CUDA_LAUNCH_BLOCKING": "1"}),
]


@pytest.mark.parametrize(("events_", "recipe_", "advice_id", "severity", "change"),
                         [row[1:] for row in SYMPTOMS], ids=[row[0] for row in SYMPTOMS])
def test_symptom(events_: list[Any], recipe_: Recipe | None, advice_id: str, severity: str,
                 change: dict[str, Any]) -> None:
    items = Advisor(recipe_).feed_all(events_).items()
    found = {item.id: item for item in items}
    assert advice_id in found, [i.id for i in items]
    item = found[advice_id]
    assert item.severity == severity
    assert {k: item.change.get(k) for k in change} == change
    assert item.title and "\n" not in item.title and item.evidence
    assert all(i.id in IDS for i in items)


def test_other_process_names_the_pid() -> None:
    item = _only(Advisor(recipe()).feed_all(_oom_with_neighbour()).items(), "oom_other_process")
    assert "4711" in item.title


def test_nan_names_first_bad_step() -> None:
    item = _only(Advisor(recipe()).feed_all(run(30, loss=lambda i: "NaN" if i >= 25 else 1.0)).items(), "nan_loss")
    assert item.step == 25 and "step 25" in item.title


def test_learning_rate_is_named() -> None:
    diverging = run(80, loss=lambda i: 2.0 - 0.01 * i if i < 40 else 1.6 + 0.1 * (i - 40))
    item = _only(Advisor(recipe({"learning_rate": 2e-4})).feed_all(diverging).items(), "loss_diverging")
    assert "0.0002" in item.title and "6.7e-05" in item.title


def _only(items: list[Advice], advice_id: str) -> Advice:
    return next(i for i in items if i.id == advice_id)


QUIET = [
    ("healthy", run(80), recipe()),
    ("healthy, no recipe", run(80), None),
    ("busy GPU with gaps", run(60, util=95, step_time=0.3), recipe()),
    ("low util, no gaps (launch-bound)", run(60, util=30, step_time=0.98), recipe()),
    ("no utilisation reading", run(60, util=None, step_time=0.3), recipe()),
    ("one spike over the line", run(40, used=lambda i: 31 * GIB if i == 20 else 20 * GIB, per_step=1), recipe()),
    ("another user's full GPU", run(40, extra_gpu=39 * GIB), recipe()),
    ("step-shaped allocation jump", run(80, allocated=lambda i: 10 * GIB + (GIB if i > 30 else 0)), recipe()),
    ("fp16: one skipped inf step", run(40, grad=lambda i: "Infinity" if i == 3 else 0.5), recipe({"fp16": True})),
    ("noisy but learning", run(80, loss=lambda i: 1.5 + 0.3 * ((i * 7919) % 11) / 11 - 0.002 * i), recipe()),
    ("low but falling loss later", run(80, loss=lambda i: 0.5 / i + 0.02), recipe()),
    ("bnb CPU kernel notice", [output("Failed to load CPU gemm_4bit_forward from kernels-community: No module "
     "named 'kernels'. Please make sure you already `pip install kernels` and the kernels >= 0.11.1")], recipe()),
    ("CPU OOM is not CUDA", [output("RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to "
     "allocate 1073741824 bytes. Error code 12 (Cannot allocate memory)")], recipe()),
    ("junk samples", [sample(1.0, -5, util=900, total=0), sample(2.0, 1 << 62, util=-1, total=-1)], recipe()),
    ("nothing", [], None),
]


@pytest.mark.parametrize(("events_", "recipe_"), [row[1:] for row in QUIET], ids=[row[0] for row in QUIET])
def test_no_false_alarm(events_: list[Any], recipe_: Recipe | None) -> None:
    assert Advisor(recipe_).feed_all(events_).items() == []


def test_vram_advice_clears_when_memory_drops() -> None:
    advisor = Advisor(recipe()).feed_all(run(40, used=_over_line))
    assert [i.id for i in advisor.items()] == ["vram_near_limit"]
    t = 1000.0
    for k in range(150):  # 15 s under the line
        advisor.feed(sample(t + k / 10, 20 * GIB))
    assert advisor.items() == []


def test_projected_peak_until_measured() -> None:
    advisor = Advisor(recipe()).feed_all([events.Estimate(t=0, peak_device_gib=34.0, peak_reserved_gib=32.0)])
    assert [i.id for i in advisor.items()] == ["vram_near_limit"]
    advisor.feed_all(run(20))
    assert advisor.items() == []


def test_most_important_first() -> None:
    found = run(40, used=_over_line, loss=lambda i: "NaN" if i > 35 else 1.0) + [output(OLD_OOM)]
    ids = [i.id for i in Advisor(recipe()).feed_all(found).items()]
    assert ids[0] == "oom_full" and "vram_near_limit" not in ids  # the OOM advice covers the line


def test_replay_equals_live() -> None:
    """Items asked for while feeding (live) and after feeding everything (replay) agree."""
    found = (run(80, used=_over_line, allocated=lambda i: 10 * GIB + i * 8 * MIB, util=30, step_time=0.3,
                 loss=lambda i: 2.0 - 0.01 * i if i < 40 else 1.6 + 0.1 * (i - 40))
             + [phase("eval", "begin", 80, 1e5), output(EVAL_OOM)])
    live = Advisor(recipe())
    for event in found:
        live.feed(event)
        live.items()
    replay = Advisor(recipe()).feed_all(found)
    assert live.items() == replay.items()
    assert len(replay.items()) >= 4
    assert Advisor(recipe()).feed_all(found).items() == Advisor(recipe()).feed_all(list(found)).items()


def test_replay_of_a_long_log_is_fast() -> None:
    """A few hours of samples: the advisor costs a small multiple of the fold every view does anyway
    (measured side by side, so a loaded machine slows both; a quadratic detector would blow the ratio)."""
    import time

    from loratui.logic.runstate import RunState

    found = run(3000, per_step=30)

    def cpu(work: Any) -> float:  # CPU time, best of 3: a stolen second or a GC pause is not the code's
        times = []
        for _ in range(3):
            start = time.process_time()
            work()
            times.append(time.process_time() - start)
        return min(times)

    fold = cpu(lambda: RunState().feed_all(found))
    advise = cpu(lambda: Advisor(recipe()).feed_all(found).items())
    assert advise < 6 * fold, (advise, fold)


@pytest.mark.slow
def test_healthy_tiny_run_gives_no_advice(healthy_tiny_run: Path) -> None:
    """A real tiny CPU run, recorded by the real supervisor, gets no advice, live or in replay."""
    run_dir = healthy_tiny_run
    log = read_log(run_dir / "events.jsonl").events
    assert any(isinstance(e, events.Step) for e in log)
    advisor = Advisor(load_recipe(run_dir / "recipe.toml"))
    live = []
    for event in log:
        advisor.feed(event)
        live.append(advisor.items())
    assert all(items == [] for items in live)


@pytest.mark.parametrize("liger_on, logits, change", [
    (False, 8.0, {"training.use_liger_kernel": True}),  # the 152k-vocab logits dominate: liger first
    (True, 8.0, {"training.per_device_train_batch_size": 2, "training.gradient_accumulation_steps": 8}),
    (False, 0.5, {"training.per_device_train_batch_size": 2, "training.gradient_accumulation_steps": 8}),
])
def test_memory_advice_offers_liger_where_the_logits_are_large(liger_on: bool, logits: float,
                                                               change: dict[str, Any]) -> None:
    r = recipe(training={"per_device_train_batch_size": 4, "gradient_accumulation_steps": 4,
                         "gradient_checkpointing": True, "use_liger_kernel": liger_on})
    estimate = events.Estimate(t=0.5, peak_device_gib=22.6, peak_reserved_gib=20.9,
                               components={"logits": logits, "activations": 1.5})
    oom_run = Advisor(r).feed_all([estimate, *run(10), output(OLD_OOM)])
    assert _only(oom_run.items(), "oom_full").change == change
    near_line = Advisor(r).feed_all([estimate, *run(40, used=_over_line)])
    item = _only(near_line.items(), "vram_near_limit")
    assert item.change == change
    if not liger_on and logits > 3:
        assert f"{logits:.1f} GiB" in item.title and "pip install liger-kernel" in item.title


def _two_ranks(peak0: int, peak1: int, len0: int, len1: int, steps: int = 5) -> list[Any]:
    """Steps of a 2-rank run (samples of GPU 0 under the line) with each rank's peak and longest batch."""
    found = run(1)[:6]
    for i in range(1, steps + 1):
        for rank, peak, length in ((0, peak0, len0), (1, peak1, len1)):
            found.append(events.Step(t=1.0 + i, step=i, epoch=0.1, step_time=1.0, tokens=4096, rank=rank,
                                     torch_allocated=peak // 2, torch_reserved=peak, peak_allocated=peak - GIB,
                                     peak_reserved=peak, max_len=length))
    return found


@pytest.mark.parametrize("packing, len1, change", [
    (False, 2048, {"data.packing": True}),  # rank 1's batches are twice as long: packing evens them
    (True, 2048, {}),
    (False, 1000, {}),  # same lengths: extra work on one rank, no recipe key fixes it
])
def test_rank_imbalance(packing: bool, len1: int, change: dict[str, Any]) -> None:
    advisor = Advisor(recipe(data={"packing": packing})).feed_all(_two_ranks(12 * GIB, 20 * GIB, 1000, len1))
    item = _only(advisor.items(), "rank_imbalance")
    assert item.change == change and item.title.startswith("Rank 1 peaks at 20.0")
    assert "rank 0 12.0" in item.evidence[0]


def test_balanced_ranks_and_short_imbalance_give_no_advice() -> None:
    assert Advisor(recipe()).feed_all(_two_ranks(12 * GIB, int(12.5 * GIB), 1000, 1100)).items() == []
    assert Advisor(recipe()).feed_all(_two_ranks(12 * GIB, 20 * GIB, 1000, 2048, steps=2)).items() == []


# -- issue 18: NCCL timeouts, explosions, failed runs ----------------------------------------------------

def test_nccl_timeout_is_its_own_advice() -> None:
    line = ("[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, "
            "Timeout(ms)=600000) ran for 600020 milliseconds before timing out.")
    (item,) = Advisor(None).feed_all([output(line), output(line.replace("Rank 1", "Rank 0"))]).items()
    assert item.id == "nccl_timeout" and item.severity == "error"
    assert "ALLREDUCE timed out after 600 s" in item.title and item.evidence[0] == line
    assert "ddp_timeout" in " ".join(item.evidence) and "2 ranks" in item.evidence[1]


def test_a_loss_explosion_with_a_nan_grad_is_divergence_first() -> None:
    logs = [events.Log(t=float(i), step=i, values={"loss": v, "grad_norm": g, "learning_rate": 1e-5})
            for i, (v, g) in enumerate([(14.68, 86.9), (14.36, 90.6), (8195.77, "NaN")], start=1)]
    items = Advisor(None).feed_all(logs).items()
    assert items[0].id == "loss_diverging" and items[0].severity == "error"
    assert "nan_loss" not in [i.id for i in items]


def test_a_single_nan_grad_norm_without_a_recipe_is_reported() -> None:
    logs = [events.Log(t=float(i), step=i, values={"loss": 0.1, "grad_norm": g}) for i, g in
            enumerate([0.6, 4.2, "NaN"], start=1)]
    assert [i.id for i in Advisor(None).feed_all(logs).items()] == ["nan_loss"]


def test_a_printed_exception_in_a_live_run_is_not_a_failure_until_it_ends() -> None:
    found = [output("Traceback (most recent call last):"), output('  File "/x/train.py", line 3, in <module>'),
             output("KeyError: 'text'")]
    assert Advisor(None).feed_all(found).items() == []
    ended = Advisor(None).feed_all(found + [events.End(t=9.0, state="failed", exit_code=1)]).items()
    assert [i.id for i in ended] == ["exception"] and "KeyError" in ended[0].title


# -- issue 24 item 6: a NaN step that transformers logged as 'loss': 0.0 ------------------------------------

def _filtered_nan_run(grad_nan: bool) -> list[Any]:
    """Real losses, then what logging_nan_inf_filter logs for windows of NaN steps: 0.0 (grad_norm nan)."""
    return run(30, loss=lambda i: 0.0 if i > 20 else 2.0 - 0.01 * i,
               grad=lambda i: ("NaN" if grad_nan else 0.5) if i > 20 else 0.5)


def test_a_zero_loss_beside_a_nan_grad_norm_is_a_nan_step_not_a_collapse() -> None:
    items = Advisor(recipe()).feed_all(_filtered_nan_run(grad_nan=True)).items()  # fp32: fp16 false
    assert [i.id for i in items] == ["nan_loss"] and items[0].step == 21
    assert "logging_nan_inf_filter" in " ".join(items[0].evidence)


def test_a_zero_loss_in_an_fp32_run_does_not_blame_fp16() -> None:
    item = _only(Advisor(recipe()).feed_all(_filtered_nan_run(grad_nan=False)).items(), "loss_zero")
    assert "fp16" not in " ".join(item.evidence) and "logging_nan_inf_filter" in " ".join(item.evidence)
    item = _only(Advisor(recipe({"fp16": True})).feed_all(_filtered_nan_run(grad_nan=False)).items(), "loss_zero")
    assert "fp16 overflow" in " ".join(item.evidence)


# The H200's own words (bench/guard_verdict_h200.sh, part B): a per-process cap reached while a neighbour held
# only its CUDA context. The neighbour did not cause it; a recipe move is the answer, and the guard can act.
_CAP_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.16 GiB. GPU 0 has a total capacity of "
            "139.80 GiB of which 107.69 GiB is free. Process 673 has 520.00 MiB memory in use. Including non-PyTorch "
            "memory, this process has 31.59 GiB memory in use. 32.00 GiB allowed; Of the allocated memory 30.71 GiB "
            "is allocated by PyTorch, and 209.16 MiB is reserved by PyTorch but unallocated.")


def _oom_beside_a_context(line: str) -> list[Any]:
    found = run(20)
    found.append(sample(found[-1].t + 0.1, 32 * GIB, procs={"100": int(31.6 * GIB), "673": 520 * 2**20}))
    return found + [output(line), end()]


@pytest.mark.parametrize("line", [_CAP_OOM, "RuntimeError: CUDA error: out of memory"])
def test_a_neighbours_bare_context_is_not_blamed_for_the_oom(line: str) -> None:
    items = Advisor(recipe({"per_device_train_batch_size": 4})).feed_all(_oom_beside_a_context(line)).items()
    assert "oom_other_process" not in [i.id for i in items]
    full = _only(items, "oom_full")
    assert full.change  # a move the guard can apply
