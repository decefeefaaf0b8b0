"""Memory advice priced with the estimator: the first proposal is the cheapest predicted to fit the line."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from loratui import events
from loratui.logic.advisor import Advisor
from loratui.logic.priced_moves import first_fitting, price_moves, shape_facts
from loratui.recipe import load_recipe

REPO = Path(__file__).resolve().parents[1]
GIB = 1 << 30
QWEN7B = json.loads((REPO / "loratui/model_configs/Qwen--Qwen2.5-7B-Instruct.json").read_text())


def bf16_7b(batch: int = 1, accum: int = 16, max_length: int = 2048, warn_gb: float = 30.0):
    """The H200 case of the issue: a 7B bf16 LoRA at batch 1 x 2048, no checkpointing (38 GiB)."""
    r = load_recipe(REPO / "recipes/qwen7b.toml")
    return msgspec.structs.replace(
        r, quantization=msgspec.structs.replace(r.quantization, load_in_4bit=False),
        training=msgspec.structs.replace(r.training, per_device_train_batch_size=batch,
                                         gradient_accumulation_steps=accum, gradient_checkpointing=False,
                                         use_liger_kernel=False, optim="adamw_torch"),
        data=msgspec.structs.replace(r.data, max_length=max_length),
        monitor=msgspec.structs.replace(r.monitor, warn_gb=warn_gb))


def test_liger_fits_the_card_not_the_line_so_checkpointing_comes_first() -> None:
    moves = price_moves(bf16_7b(), QWEN7B, line_gib=30.0)
    liger = next(m for m in moves if m.change == {"training.use_liger_kernel": True})
    assert 30.0 < liger.peak_gib < 34.0 and not liger.fits  # measured: 30.9 GiB, over the 30 GiB line
    top = first_fitting(moves)
    assert top is moves[0] and top.change == {"training.gradient_checkpointing": True}
    assert top.peak_gib < 30.0 and 36.0 < top.now_gib < 40.0
    assert f"predicted peak {top.peak_gib:.1f} GiB (now {top.now_gib:.1f})" in top.describe()
    assert "slower" in top.describe()


def test_fitting_moves_are_ordered_by_speed_cost_and_keep_the_effective_batch() -> None:
    moves = price_moves(bf16_7b(batch=4, accum=4, max_length=1024), QWEN7B, line_gib=30.0)
    fitting = [m for m in moves if m.fits]
    assert fitting and all(m.peak_gib <= 30.0 for m in fitting)
    assert [m.cost for m in fitting] == sorted(m.cost for m in fitting)
    assert all(not m.fits for m in moves[len(fitting):])  # the rest follow, never before a fitting one
    for move in fitting:
        batch = move.change.get("training.per_device_train_batch_size")
        if batch is not None:
            assert batch * move.change["training.gradient_accumulation_steps"] == 16


def test_when_no_single_move_fits_a_combination_is_priced() -> None:
    moves = price_moves(bf16_7b(max_length=8192), QWEN7B, line_gib=20.0)
    top = first_fitting(moves)
    assert top is not None and len(top.change) >= 2 and " + " in top.text and top.peak_gib <= 20.0


def test_an_unsizable_config_prices_nothing() -> None:
    assert price_moves(bf16_7b(), {"model_type": "x"}, line_gib=30.0) == []


def test_shape_facts_keep_only_what_the_estimate_reads() -> None:
    facts = shape_facts({**QWEN7B, "architectures": ["Qwen2ForCausalLM"], "rope_scaling": None})
    assert "architectures" not in facts and facts["hidden_size"] == QWEN7B["hidden_size"]
    assert price_moves(bf16_7b(), facts, 30.0)[0].change == price_moves(bf16_7b(), QWEN7B, 30.0)[0].change


def _estimate_event(recipe, config) -> events.Estimate:
    from loratui.logic.estimate import estimate

    found = estimate(recipe, config)
    return events.Estimate(t=0.5, peak_device_gib=found.peak_device_gib, peak_reserved_gib=found.peak_reserved_gib,
                           components=found.components, config=shape_facts(config), seq=recipe.data.max_length)


def test_the_advisor_proposes_the_priced_move_for_an_oom() -> None:
    recipe = bf16_7b()
    adv = Advisor(recipe)
    adv.feed(_estimate_event(recipe, QWEN7B))
    adv.feed(events.State(t=1.0, state="training"))
    adv.feed(events.Output(t=2.0, stream="stderr", lines=[
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "31.36 GiB of which 1.10 GiB is free. Of the allocated memory 28.50 GiB is allocated by PyTorch, and "
        "0.20 GiB is reserved by PyTorch but unallocated."]))
    (oom,) = [a for a in adv.items() if a.id == "oom_full"]
    assert oom.change == {"training.gradient_checkpointing": True}
    assert "predicted peak" in oom.title and "(now 3" in oom.title


def test_the_projected_vram_advice_is_priced_too() -> None:
    recipe = bf16_7b()
    adv = Advisor(recipe)
    adv.feed(_estimate_event(recipe, QWEN7B))
    (vram,) = [a for a in adv.items() if a.id == "vram_near_limit"]
    assert vram.change == {"training.gradient_checkpointing": True} and "predicted peak" in vram.title


def test_without_the_models_shape_the_recipe_rules_still_speak() -> None:
    recipe = bf16_7b()
    adv = Advisor(recipe)
    adv.feed(events.Estimate(t=0.5, peak_device_gib=38.0, peak_reserved_gib=36.0, components={"logits": 3.5}))
    (vram,) = [a for a in adv.items() if a.id == "vram_near_limit"]
    assert vram.change == {"training.use_liger_kernel": True}  # the old log's rule: no prediction to check
