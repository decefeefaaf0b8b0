"""Issue 26 item 6: `target_modules = "q_proj"` (a string) is a regex over full module names in peft, so
it matches nothing; the launch says a list was meant, and the estimate reads the string as peft does."""

from __future__ import annotations

from pathlib import Path

import pytest

from loratui.logic.estimate import read_setup
from loratui.recipe import RecipeError, load_recipe
from loratui.supervisor import launch
from tests.test_launch_checks import DATA, _recipe


def test_a_string_target_naming_a_module_says_a_list_was_meant(tmp_path: Path) -> None:
    recipe = _recipe(tmp_path, DATA, **{'["q_proj", "v_proj"]': '"q_proj"'})
    with pytest.raises(RecipeError) as caught:
        launch.check_paths(load_recipe(recipe), recipe, None)
    message = str(caught.value)
    assert 'target_modules = "q_proj"` is a string' in message and "regular expression" in message
    assert 'target_modules = ["q_proj"]' in message and "matches no module" not in message


def test_a_regex_string_that_matches_passes_and_is_estimated_as_its_matches(tmp_path: Path) -> None:
    recipe = _recipe(tmp_path, DATA, **{'["q_proj", "v_proj"]': '".*\\\\.(q_proj|v_proj)"'})
    launch.check_paths(load_recipe(recipe), recipe, None)
    assert read_setup(load_recipe(recipe)).targets == ("q_proj", "v_proj")  # was the pattern's letters
