"""A watched script whose live settings loratui's estimate does not take (an optimizer it does not model, a
learning rate of 1.0 as Prodigy-style optimizers use) gets no VRAM estimate, and one notice that says why. It
named `recipe.toml:40`, a file the user never wrote and that was not even on disk (the live settings' text
is written only once it passes), and spoke of a recipe: it names the field as the script sets it."""

from __future__ import annotations

from typing import Any

import pytest

from loratui.recipe import RecipeError
from loratui.trainer.preflight import live_recipe, recipe_text


@pytest.fixture(scope="module")
def peft_model(model_cache: Any) -> Any:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from loratui.trainer.tiny import ensure_tiny_model

    model = AutoModelForCausalLM.from_pretrained(ensure_tiny_model(), dtype=torch.float32)
    return get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))


@pytest.mark.parametrize(("setting", "field"), [
    ({"optim": "lion_32bit"}, "TrainingArguments.optim"),
    ({"learning_rate": 1.0}, "TrainingArguments.learning_rate"),
])
def test_the_live_field_is_named_not_a_recipe_line(peft_model: Any, tmp_path: Any, setting: dict[str, Any],
                                                   field: str) -> None:
    from transformers import TrainingArguments

    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[], max_steps=10, **setting)
    with pytest.raises(RecipeError) as refused:
        recipe_text(live_recipe(args, peft_model, 20, None, 30.0), "python train.py")
    said = str(refused.value)
    assert said.startswith(f"{field}: "), said
    assert "recipe.toml" not in said, said


def test_live_settings_loratui_takes_still_give_their_text(peft_model: Any, tmp_path: Any) -> None:
    from transformers import TrainingArguments

    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[], max_steps=10,
                             optim="adamw_torch_fused", learning_rate=2e-4)
    assert 'optim = "adamw_torch_fused"' in recipe_text(live_recipe(args, peft_model, 20, None, 30.0), "python x.py")
