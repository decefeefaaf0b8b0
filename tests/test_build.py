"""The trainer's build step: the recipe's names reach LoraConfig and TrainingArguments as written."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from loratui.recipe import load_recipe
from loratui.trainer import build
from loratui.trainer.tiny import ensure_tiny_model
from tests.conftest import REPO, TINY


@pytest.fixture(scope="module")
def tiny_dir() -> str:
    return str(ensure_tiny_model())


def test_lora_settings_reach_peft(tiny_dir: str) -> None:
    recipe = load_recipe(TINY)
    recipe = msgspec.structs.replace(recipe, lora=msgspec.structs.replace(
        recipe.lora, r=4, lora_alpha=12, lora_dropout=0.1, target_modules=["q_proj", "v_proj"]))
    model = build.load_model(build.resolve_for_machine(recipe, cuda=False).recipe, tiny_dir, cuda=False)
    config = model.peft_config["default"]
    assert (config.r, config.lora_alpha, config.lora_dropout) == (4, 12, 0.1)
    assert set(config.target_modules) == {"q_proj", "v_proj"}
    total, trainable = build.count_parameters(model)
    assert 0 < trainable < total


def test_training_arguments_mapping(tmp_path: Path) -> None:
    recipe = load_recipe(REPO / "recipes" / "qwen7b.toml")
    cpu = build.resolve_for_machine(recipe, cuda=False)
    args = build.training_arguments(cpu.recipe, str(tmp_path), max_steps=7)
    assert args.max_steps == 7 and args.output_dir == str(tmp_path)
    assert args.optim == "adamw_torch" and args.use_cpu  # paged 8-bit needs CUDA: a visible fallback
    assert {key for key, _ in cpu.notices} == {"training.optim"}
    assert args.logging_nan_inf_filter is False and args.report_to in ([], "none", ["none"])
    assert args.per_device_train_batch_size == 4 and args.gradient_accumulation_steps == 4
    assert 0 < (getattr(args, "warmup_ratio", None) or args.warmup_steps) < 1  # warmup 3% of the steps


def test_fsdp_settings_by_their_accelerate_names(tmp_path: Path) -> None:
    text = (REPO / "recipes" / "tiny.toml").read_text() + '\n[distributed]\nnum_processes = 2\nstrategy = "fsdp"\n'
    recipe = load_recipe(tmp_path / "x.toml", text=text)
    extra = build._distributed_arguments(recipe)
    assert extra["fsdp"] == "full_shard auto_wrap"
    assert extra["fsdp_config"]["auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP"


def test_liger_without_the_package_is_a_notice_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    recipe = load_recipe(REPO / "recipes" / "qwen7b.toml")
    recipe = msgspec.structs.replace(recipe, training=msgspec.structs.replace(recipe.training, use_liger_kernel=True))
    real = build.importlib.util.find_spec
    monkeypatch.setattr(build.importlib.util, "find_spec",
                        lambda name, *a: None if name == "liger_kernel" else real(name, *a))
    resolved = build.resolve_for_machine(recipe, cuda=True)
    assert resolved.recipe.training.use_liger_kernel is False
    assert [m for k, m in resolved.notices if k == "training.use_liger_kernel"] == [
        "liger kernels unavailable: liger-kernel is not installed (pip install liger-kernel); "
        "training without them (more VRAM)"]
