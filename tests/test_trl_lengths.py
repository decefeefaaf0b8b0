"""The OOM's length move for a watched TRL script names the length fields its config really has: GRPOConfig has no
max_length (the live recipe's 1024 is assumed, trainer/preflight.py), so lowering max_length would be a setting the
trainer does not read; its completions' cap is what it has. The fields are read from the installed trl's own classes
(dataclasses.fields), not from what some TRL version once had."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from loratui import events
from loratui.logic.advisor import Advisor
from loratui.trainer.preflight import config_lengths

trl = pytest.importorskip("trl")

LIVE = """\
[model]
path = "loratui:watched"

[quantization]
load_in_4bit = true

[training]
per_device_train_batch_size = 1
gradient_checkpointing = true

[data]
dataset = "loratui:watched"
max_length = 1024
"""
"""A live recipe whose first memory move is the length: batch 1, checkpointing and 4-bit already in use."""

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "79.15 GiB of which 1.05 GiB is free. Including non-PyTorch memory, this process has 78.08 GiB memory in use. "
       "Of the allocated memory 77.21 GiB is allocated by PyTorch, and 0.35 GiB is reserved by PyTorch but "
       "unallocated.")


def _config(cls: type, tmp: Path, **values: object) -> object:
    return cls(output_dir=str(tmp), report_to=[], use_cpu=True, bf16=False, **values)


def _oom_advice(args: object, script: str):
    advisor = Advisor(None).feed_all([
        events.Header(t=0.0, schema=events.SCHEMA_VERSION, run_id="r", recipe_hash="", command=["python", script]),
        events.Settings(t=0.5, recipe=LIVE, lengths=config_lengths(args)),
        events.State(t=1.0, state="training"),
        events.Output(t=2.0, stream="stderr", lines=[OOM]),
    ])
    top = advisor.items()[0]
    assert top.id == "oom_full"
    return top


def _named(top, cls: type) -> set[str]:
    """The config fields the advice's change names (`GRPOConfig.max_completion_length`, `max_length (...)`)."""
    fields = {f.name for f in dataclasses.fields(cls)}
    return {name for key in top.change for name in fields if key == f"{cls.__name__}.{name}" or
            key.split(" ", 1)[0] == name}


def test_grpo_oom_lowers_the_completion_length_grpo_has(tmp_path: Path) -> None:
    args = _config(trl.GRPOConfig, tmp_path, max_completion_length=512)
    assert "max_length" not in {f.name for f in dataclasses.fields(trl.GRPOConfig)}
    assert config_lengths(args) == {"GRPOConfig.max_completion_length": 512}
    top = _oom_advice(args, "train_grpo.py")
    assert not any(key.startswith("max_length") for key in top.change), top.change
    assert top.change == {"GRPOConfig.max_completion_length": 256}
    assert "GRPOConfig.max_completion_length from 512 to 256" in top.title
    assert _named(top, trl.GRPOConfig) == {"max_completion_length"}


def test_dpo_oom_keeps_the_max_length_dpo_has(tmp_path: Path) -> None:
    args = _config(trl.DPOConfig, tmp_path, max_length=1024)
    assert config_lengths(args) is None  # its max_length is the live recipe's: the move spoken as before
    top = _oom_advice(args, "train_dpo.py")
    assert "lower max_length from 1024 to 512" in top.title
    assert _named(top, trl.DPOConfig) == {"max_length"}


def test_a_short_completion_cap_is_not_halved_further(tmp_path: Path) -> None:
    top = _oom_advice(_config(trl.GRPOConfig, tmp_path, max_completion_length=64), "train_grpo.py")
    assert not top.change or not any("length" in key for key in top.change), top.change


def test_a_long_batch_in_grpo_is_not_truncated_with_a_max_length_it_lacks(tmp_path: Path) -> None:
    """One unusually long batch asks for truncation (tests/test_advice_long_sample.py), with max_length: GRPOConfig
    has none, so its own length move stands."""
    args = _config(trl.GRPOConfig, tmp_path, max_completion_length=512)
    steps = [events.Step(t=1.0 + i, step=i, epoch=0.0, step_time=0.1, max_len=128 + 8 * (i % 3)) for i in range(1, 9)]
    advisor = Advisor(None).feed_all([
        events.Header(t=0.0, schema=events.SCHEMA_VERSION, run_id="r", recipe_hash="", command=["python", "g.py"]),
        events.Settings(t=0.5, recipe=LIVE, lengths=config_lengths(args)), events.State(t=0.8, state="training"),
        *steps, events.Notice(t=10.0, level="error", key="oom_batch",
                              message="out of memory on a batch of sequence length 900"),
        events.Output(t=10.5, stream="stderr", lines=[OOM])])
    assert advisor.long_sample() == (900, 136)
    top = advisor.items()[0]
    assert top.id == "oom_full" and top.change == {"GRPOConfig.max_completion_length": 256}, top


def test_grpo_over_the_vram_line_names_its_completion_length(tmp_path: Path) -> None:
    """The VRAM warning's move is the same memory move: GRPOConfig's length, not max_length."""
    from loratui.units import GIB
    from tests.test_advice import run

    args = _config(trl.GRPOConfig, tmp_path, max_completion_length=512)
    found = [events.Header(t=0.0, schema=events.SCHEMA_VERSION, run_id="r", recipe_hash="", command=["python", "g.py"]),
             events.Settings(t=0.5, recipe=LIVE, lengths=config_lengths(args))]
    found += run(40, used=lambda i: 31 * GIB if i > 20 else 20 * GIB)[1:]  # over the 30 GiB line from step 21
    vram = [a for a in Advisor(None).feed_all(found).items() if a.id == "vram_near_limit"]
    assert vram and vram[0].change == {"GRPOConfig.max_completion_length": 256}, vram
