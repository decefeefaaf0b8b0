"""Advice applied twice (`A` on a run started from a fixed copy, or `apply_advice`): the copy of the copy kept the
first copy's "# Written by loratui ..." header under its own, one more stacked line each time, and its name grew
(`qwen7b.fix-a.fix-b.toml`). One header lists what was applied, oldest first (newcomer trial 15)."""

from __future__ import annotations

from pathlib import Path

import yaml

from loratui import rundir
from loratui.logic import applied
from loratui.recipe import load_recipe
from loratui.supervisor.restart import write_fix, write_fixed_recipe
from tests.test_apply_advice import _fake_run
from tests.test_config_fix import LLAMAFACTORY_YAML, PLACEHOLDER, _fix, _watched_run


def _run_from(tmp_path: Path, recipe: Path, run_id: str) -> rundir.RunDir:
    """A second run, started from a fixed copy (its run directory holds that copy as its recipe)."""
    settings = rundir.RunSettings(run_id=run_id, name="qwen7b", recipe_source=str(recipe), recipe_dir=str(recipe.parent))
    return rundir.create(tmp_path / "runs", settings, recipe.read_text())


def _header(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("#")][:4]


def test_a_recipe_fixed_twice_has_one_header_listing_both(tmp_path: Path) -> None:
    run, _ = _fake_run(tmp_path)
    first, _ = write_fixed_recipe(run, "vram_near_limit", {"training.per_device_train_batch_size": 2})
    assert first.read_text().startswith("# Written by loratui from run r1 (advice vram_near_limit): "
                                        "training.per_device_train_batch_size = 2\n")  # one: one line, as before
    second, _ = write_fixed_recipe(_run_from(tmp_path, first, "r2"), "loss_flat", {"training.learning_rate": 1e-4})
    text = second.read_text()
    assert second.name == "qwen7b.fix-loss_flat.toml", second.name
    assert text.startswith("# Written by loratui; advice applied, oldest first:\n"
                           "#   run r1 (advice vram_near_limit): training.per_device_train_batch_size = 2\n"
                           "#   run r2 (advice loss_flat): training.learning_rate = 0.0001\n"), text[:400]
    assert text.count("Written by loratui") == 1, text[:400]
    recipe = load_recipe(second)
    assert recipe.training.per_device_train_batch_size == 2 and recipe.training.learning_rate == 1e-4
    third, _ = write_fixed_recipe(_run_from(tmp_path, second, "r3"), "vram_near_limit",
                                  {"training.gradient_accumulation_steps": 8})
    entries, rest = applied.split(third.read_text())
    assert [entry.split(":")[0] for entry in entries] == ["run r1 (advice vram_near_limit)", "run r2 (advice loss_flat)",
                                                          "run r3 (advice vram_near_limit)"]
    assert "Written by loratui" not in rest
    assert third.name == "qwen7b.fix-vram_near_limit-2.toml", third.name  # the first copy's name is taken


def test_a_config_fixed_twice_has_one_header_listing_both(tmp_path: Path) -> None:
    command = ["llamafactory-cli", "train", "examples/llama3_lora_sft.yaml"]
    run, _ = _watched_run(tmp_path, command, LLAMAFACTORY_YAML)
    first, _ = write_fix(run, "vram_near_limit", _fix({"training.per_device_train_batch_size": 2}, command))
    again = ["llamafactory-cli", "train", f"examples/{first.name}"]
    settings = rundir.RunSettings(run_id="r2", name="cfg", recipe_source="", recipe_dir=str(tmp_path / "work"),
                                  command=again, cwd=str(tmp_path / "work"))
    second, _ = write_fix(rundir.create(tmp_path / "runs", settings, PLACEHOLDER), "loss_flat",
                          _fix({"training.gradient_accumulation_steps": 8}, again))
    text = second.read_text()
    assert second.name == "llama3_lora_sft.loratui-fix2.yaml"
    assert _header(text)[:3] == [
        "# Written by loratui; advice applied, oldest first:",
        "#   run r1 (advice vram_near_limit), from llama3_lora_sft.yaml: per_device_train_batch_size: 2",
        "#   run r2 (advice loss_flat), from llama3_lora_sft.loratui-fix1.yaml: gradient_accumulation_steps: 8"], text
    assert text.count("Written by loratui") == 1
    data = yaml.safe_load(text)
    assert data["per_device_train_batch_size"] == 2 and data["gradient_accumulation_steps"] == 8


def test_a_users_own_comment_first_is_not_taken_for_the_header() -> None:
    text = "# my notes: Written by loratui? no\n[model]\n"
    assert applied.split(text) == ([], text)
    assert applied.with_header(text, "run r1 (advice a): x = 1") == "# Written by loratui from run r1 (advice a): x = 1\n" + text
