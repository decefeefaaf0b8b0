"""A NaN in a recipe run whose weights are float16 with no mixed precision (the README's NaN demo on `tiny`): the
advice was a third of the learning rate, and each apply NaN'd again at step 4 (0.9, 0.3, 0.1 measured on tiny),
where bfloat16 or float32 weights at 0.9 trained. The advice now switches the weights' dtype: one apply leaves it."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from loratui import events
from loratui.logic.advisor import Advisor
from loratui.recipe import ModelSection, load_recipe
from loratui.supervisor.restart import write_fixed_recipe
from tests.test_advice import recipe, run
from tests.test_apply_advice import _fake_run


def _fp16_weights(**training: object):  # type: ignore[no-untyped-def]
    r = recipe({"learning_rate": 0.9, **training})
    return msgspec.structs.replace(r, model=ModelSection(path="/models/qwen-7b", dtype="float16"))


def _advice(r, found):  # type: ignore[no-untyped-def]
    return next(a for a in Advisor(r).feed_all(found).items() if a.id == "nan_loss")


def _cpu(found: list) -> list:
    return [events.GpuInfo(t=0.0, available=False, reason="no CUDA") if isinstance(e, events.GpuInfo) else e
            for e in found if not isinstance(e, events.Sample)]


NAN = {"loss": lambda i: "NaN" if i >= 4 else 6.5}


@pytest.mark.parametrize(("cpu", "name", "target"), [
    (True, "", "float32"),  # the README's demo: tiny on a CPU
    (False, "NVIDIA A100-SXM4-40GB", "bfloat16"),
    (False, "Tesla V100-SXM2-32GB", "float32"),  # no bf16 there
])
def test_float16_weights_without_mixed_precision_switch_the_dtype(cpu: bool, name: str, target: str) -> None:
    found = run(10, **NAN, **({"name": name} if name else {}))  # type: ignore[arg-type]
    advice = _advice(_fp16_weights(), _cpu(found) if cpu else found)
    assert advice.change == {"model.dtype": target}, advice
    assert f"switch model.dtype from float16 to {target}" in advice.title


def test_float32_or_mixed_precision_still_lowers_the_rate() -> None:
    found = run(10, **NAN)  # type: ignore[arg-type]
    assert _advice(recipe({"learning_rate": 0.9}), found).change == {"training.learning_rate": 0.3}


def test_the_dtype_change_writes_a_recipe_that_loads(tmp_path: Path) -> None:
    run_dir, _ = _fake_run(tmp_path)
    path, _ = write_fixed_recipe(run_dir, "nan_loss", {"model.dtype": "float32"})
    assert load_recipe(path).model.dtype == "float32"
