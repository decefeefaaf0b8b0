"""The NaN advice's evidence names the precision the run trained in (trial 11: a recipe with `dtype = "float16"` and
neither fp16 nor bf16 mixed precision said "fp32" beside its NaN)."""
from __future__ import annotations

import msgspec

from loratui.logic.advisor.advice import Finding
from loratui.logic.advisor.loss_advice import _nan_advice
from loratui.recipe import ModelSection, Recipe, TrainingSection

NAN = Finding("nan_loss", 4, {"what": "loss", "value": "nan", "names": [], "lr": 0.9})


def _said(recipe: Recipe) -> str:
    return next(e for e in _nan_advice(NAN, recipe).evidence if e.startswith("optim = "))


def test_float16_weights_without_mixed_precision_are_not_called_fp32() -> None:
    recipe = Recipe(model=ModelSection(path="m", dtype="float16"), training=TrainingSection(learning_rate=0.9))
    assert "float16 weights (no fp16/bf16 mixed precision)" in _said(recipe) and "fp32" not in _said(recipe)


def test_the_other_precisions_are_named_as_before() -> None:
    base = Recipe(model=ModelSection(path="m", dtype="float32"))
    assert ", fp32, " in _said(base)
    assert ", bf16, " in _said(msgspec.structs.replace(base, training=TrainingSection(bf16=True)))
    assert ", fp16, " in _said(msgspec.structs.replace(base, training=TrainingSection(fp16=True)))
