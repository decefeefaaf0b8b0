"""Advice changes written into a copy of the recipe: values replaced in place, comments kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from loratui.logic.recipe_edit import apply_changes, recipe_changes, toml_value
from loratui.recipe import load_recipe
from tests.conftest import REPO

QWEN = (REPO / "recipes" / "qwen7b.toml").read_text()


def test_replaces_value_and_keeps_comment() -> None:
    out = apply_changes(QWEN, {"training.per_device_train_batch_size": 2, "training.gradient_accumulation_steps": 8})
    recipe = load_recipe(Path("x.toml"), text=out)
    assert recipe.training.per_device_train_batch_size == 2 and recipe.training.gradient_accumulation_steps == 8
    line = next(x for x in out.splitlines() if x.startswith("per_device_train_batch_size"))
    assert "# activations grow linearly" in line
    assert out.count("\n") == QWEN.count("\n")  # nothing else moved


def test_adds_missing_key_under_its_section_and_missing_section() -> None:
    text = '[model]\npath = "m"\n[data]\npath = "d.jsonl"\n'
    out = apply_changes(text, {"training.gradient_checkpointing": True, "data.max_length": 512})
    recipe = load_recipe(Path("x.toml"), text=out)
    assert recipe.training.gradient_checkpointing is True and recipe.data.max_length == 512
    assert out.index("max_length") > out.index("[data]")


@pytest.mark.parametrize("value,literal", [(True, "true"), (2e-4, "0.0002"), ("adamw_torch", '"adamw_torch"'),
                                           (["q_proj"], '["q_proj"]'), (3, "3")])
def test_toml_literals(value: object, literal: str) -> None:
    assert toml_value(value) == literal


def test_env_changes_are_split_off() -> None:
    keys, env = recipe_changes({"env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "training.bf16": True})
    assert keys == {"training.bf16": True} and env == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}


def test_multi_line_array_with_comments_survives_an_edit_of_another_key() -> None:
    text = ('[model]\npath = "m"\n[lora]\ntarget_modules = [\n    "q_proj",  # attention\n    "v_proj",\n]\n'
            'r = 16  # rank\n[data]\npath = "d.jsonl"\n')
    out = apply_changes(text, {"lora.r": 8})
    assert load_recipe(Path("x.toml"), text=out).lora.target_modules == ["q_proj", "v_proj"]
    assert '    "q_proj",  # attention\n' in out and "r = 8  # rank" in out


def test_replacing_a_multi_line_array_gives_valid_toml() -> None:
    text = '[model]\npath = "m"\n[lora]\ntarget_modules = [\n    "q_proj",\n    "v_proj",\n]\n[data]\npath = "d"\n'
    out = apply_changes(text, {"lora.target_modules": ["q_proj", "k_proj", "v_proj"]})
    assert load_recipe(Path("x.toml"), text=out).lora.target_modules == ["q_proj", "k_proj", "v_proj"]


def test_inline_table_section_is_edited_in_place() -> None:
    text = 'lora = { r = 16, lora_alpha = 32 }  # small\n[model]\npath = "m"\n[data]\npath = "d"\n'
    out = apply_changes(text, {"lora.r": 8, "lora.lora_dropout": 0.1})
    recipe = load_recipe(Path("x.toml"), text=out)
    assert (recipe.lora.r, recipe.lora.lora_alpha, recipe.lora.lora_dropout) == (8, 32, 0.1)
    assert out.count("lora") == out.splitlines()[0].count("lora") and "# small" in out


def test_dotted_keys_are_edited_in_place() -> None:
    text = ('model.path = "m"\ntraining.learning_rate = 1e-3  # high on purpose\ndata.path = "d"\n')
    out = apply_changes(text, {"training.learning_rate": 2e-4, "training.bf16": True})
    recipe = load_recipe(Path("x.toml"), text=out)
    assert recipe.training.learning_rate == 2e-4 and recipe.training.bf16 is True
    assert "[training]" not in out and "# high on purpose" in out


def test_comments_everywhere_are_kept() -> None:
    out = apply_changes(QWEN, {"training.gradient_checkpointing": True, "monitor.warn_gb": 20})
    comments = [line.split("#", 1)[1] for line in QWEN.splitlines() if "#" in line]
    assert all(comment in out for comment in comments)
    assert load_recipe(Path("x.toml"), text=out).monitor.warn_gb == 20


def test_a_hash_inside_a_string_is_not_a_comment() -> None:
    text = '[model]\npath = "a#b"  # note\n[data]\npath = "d.jsonl"\n'
    out = apply_changes(text, {"model.path": "c"})
    assert 'path = "c"  # note' in out


def test_every_view_writes_values_with_the_one_toml_writer() -> None:
    """The advice panel and doctor show a change as it would be written in the recipe: valid TOML."""
    from loratui.commands.doctor import _toml
    from loratui.tui.widgets.advice_panel import change_text

    change = {"lora.target_modules": ["q_proj", "v_proj"], "model.path": 'a "quoted" dir'}
    assert change_text(change) == 'lora.target_modules = ["q_proj", "v_proj"]\nmodel.path = "a \\"quoted\\" dir"'
    assert [_toml(v) for v in change.values()] == [toml_value(v) for v in change.values()]
