"""A CPU run's recorded estimate holds no CUDA context (issue 16 item 6): VRAM advice on a CPU run began
from a peak that counted 1.4 GiB a CPU process never has."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from loratui import events
from loratui.logic.estimate import CONTEXT_GIB, estimate
from loratui.recipe import load_recipe
from tests.conftest import SMALL_QWEN2, TINY

CONFIG = {**SMALL_QWEN2, "tie_word_embeddings": True}


def test_cpu_estimate_has_no_cuda_context() -> None:
    recipe = load_recipe(TINY)
    gpu, cpu = estimate(recipe, CONFIG), estimate(recipe, CONFIG, cuda=False)
    assert "cuda_context_non_torch" in gpu.components and "cuda_context_non_torch" not in cpu.components
    assert cpu.peak_device_gib <= gpu.peak_device_gib - CONTEXT_GIB
    assert sum(cpu.components.values()) == pytest.approx(cpu.peak_device_gib)


@pytest.mark.parametrize("cuda", [False, True])
def test_the_trainer_records_the_estimate_of_its_device(cuda: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from loratui.trainer.preflight import record_estimate

    if cuda:  # no GPU here: only the card's size is asked for
        import torch

        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: SimpleNamespace(total_memory=80 << 30))
    written: list[Any] = []
    log = SimpleNamespace(write=written.append)
    model = SimpleNamespace(config=SimpleNamespace(to_dict=lambda: dict(CONFIG)))
    record_estimate(log.write, load_recipe(TINY), model, cuda, 0, 64)  # type: ignore[arg-type]
    (recorded,) = [e for e in written if isinstance(e, events.Estimate)]
    assert ("cuda_context_non_torch" in recorded.components) is cuda, json.dumps(recorded.components)
