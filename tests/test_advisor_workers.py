"""The one rule for raising the loader's workers (loratui/logic/advisor/advice.py `more_workers`), which every
data_starved move uses: the GPU-utilisation detector's, the text reader's and the user's-words finding's."""

from __future__ import annotations

from pathlib import Path

import pytest

from loratui.logic.advisor.advice import WORKERS_MAX, more_workers, more_workers_change
from loratui.recipe import load_recipe

TINY = Path(__file__).resolve().parent.parent / "recipes" / "tiny.toml"


@pytest.mark.parametrize(("now", "new"), [(0, 4), (1, 2), (4, 8), (6, 12), (8, 16), (12, 16), (15, 16),
                                          (16, None), (32, None)])
def test_none_to_four_then_doubled_up_to_the_most(now: int, new: int | None) -> None:
    assert more_workers(now) == new
    assert WORKERS_MAX == 16


@pytest.mark.parametrize(("workers", "change"), [(0, {"training.dataloader_num_workers": 4}),
                                                (8, {"training.dataloader_num_workers": 16}), (16, {})])
def test_the_change_names_the_recipe_key_or_nothing(workers: int, change: dict[str, object]) -> None:
    assert more_workers_change(None) == {}
    text = TINY.read_text()
    recipe = load_recipe(TINY, text.replace("[training]", f"[training]\ndataloader_num_workers = {workers}", 1))
    assert recipe.training.dataloader_num_workers == workers
    assert more_workers_change(recipe) == change
