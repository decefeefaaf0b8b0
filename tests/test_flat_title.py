"""A flat loss's advice says the move it makes (a newcomer's trial, polish 10): the title said "check the
data" while its change was `learning_rate = 0.0002`, so applying it changed what the title never named."""

from __future__ import annotations

import random
from pathlib import Path

import msgspec

from loratui import events
from loratui.logic.advisor import Advisor
from loratui.logic.advisor.render import change_line
from loratui.recipe import load_recipe

TINY = Path(__file__).resolve().parent.parent / "recipes" / "tiny.toml"


def _flat_run(lr: float) -> list[events.Log]:
    """30 logs every 10 steps past the warm-up, the loss within 0.4% of 3.7 and never repeating exactly."""
    rng = random.Random(7)
    losses = [round(3.7 + rng.uniform(-0.007, 0.007), 3) for _ in range(30)]
    return [events.Log(t=float(i), step=(i + 2) * 10, values={"loss": v, "learning_rate": lr})
            for i, v in enumerate(losses)]


def _flat_advice(lr: float):  # type: ignore[no-untyped-def]
    tiny = load_recipe(TINY)
    recipe = msgspec.structs.replace(tiny, training=msgspec.structs.replace(tiny.training, learning_rate=lr))
    (advice,) = [a for a in Advisor(recipe).feed_all(_flat_run(lr)).items() if a.id == "loss_flat"]
    return advice


def test_a_flat_loss_at_a_tiny_learning_rate_names_the_rate_it_sets() -> None:
    advice = _flat_advice(1e-6)
    assert advice.change == {"training.learning_rate": 2e-4}
    assert "flat from the start" in advice.title
    assert "raise learning_rate from 1e-06 to 0.0002" in advice.title, advice.title
    assert "check the data" not in advice.title
    assert change_line(advice.change).endswith("learning_rate = 0.0002")  # the value the title names


def test_a_flat_loss_at_a_usual_rate_says_check_the_data_and_changes_nothing() -> None:
    advice = _flat_advice(2e-4)
    assert advice.change == {}
    assert advice.title.endswith("check the data"), advice.title
