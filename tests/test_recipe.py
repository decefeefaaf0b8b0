"""Recipe validation: every bundled recipe loads; bad recipes get one clear message and exit code 2."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from loratui.recipe import RecipeError, find_key_line, load_recipe
from tests.conftest import REPO, loratui, write_model_config

GOOD = """\
[model]
path = "loratui:tiny"
[training]
max_steps = 2
[data]
path = "{data}"
"""
DATA = REPO / "recipes" / "data" / "tiny-instructions.jsonl"


@pytest.mark.parametrize("recipe", sorted((REPO / "recipes").glob("*.toml")), ids=lambda p: p.name)
def test_bundled_recipes_validate(recipe: Path) -> None:
    load_recipe(recipe)


def _good(**replace: str) -> str:
    text = GOOD.format(data=DATA)
    for old, new in replace.items():
        text = text.replace(old, new)
    return text


# (name, recipe text, fragments the single message must contain)
BAD = [
    ("syntax", "[model\npath = 1", ["not valid TOML", "line 1"]),
    ("unknown_key", _good(**{"max_steps = 2": "max_steps = 2\nlearning_rat = 1e-4"}),
     [":5:", "training.learning_rat", "did you mean `learning_rate`"]),
    ("unknown_section", _good(**{"[data]": "[dataa]"}), ["unknown key `dataa`", ":5"]),
    ("wrong_type", _good(**{"max_steps = 2": 'max_steps = "two"'}), [":4:", "training.max_steps", "Expected `int`"]),
    # a tmux trial: "Expected `float`, got `str`" named no value and said nothing to do
    ("wrong_type_float", _good(**{"max_steps = 2": 'max_steps = 2\nlearning_rate = "fast"'}),
     [":5:", "training.learning_rate", '"fast"', "write a number", "learning_rate = 0.0002"]),
    ("wrong_type_in_a_list", _good(**{"[training]": "[lora]\ntarget_modules = [3]\n[training]"}),
     [":4:", "lora.target_modules[0]", "(it is 3)", "double quotes"]),
    ("wrong_type_bool", _good(**{"max_steps = 2": 'max_steps = 2\nbf16 = "yes"'}),
     [":5:", "training.bf16", '"yes"', "true or false"]),
    ("missing_model", _good(**{'path = "loratui:tiny"': ""}), ["model.path", "--model-path"]),
    ("bad_quant_type", _good(**{"[training]": '[quantization]\nload_in_4bit = true\nbnb_4bit_quant_type = "nf5"\n[training]'}),
     ["quantization.bnb_4bit_quant_type", ":5:", "nf4"]),
    ("both_4_and_8_bit", _good(**{"[training]": "[quantization]\nload_in_4bit = true\nload_in_8bit = true\n[training]"}),
     ["load_in_4bit and load_in_8bit", ":5:"]),
    ("bf16_and_fp16", _good(**{"max_steps = 2": "max_steps = 2\nbf16 = true\nfp16 = true"}), ["bf16 and fp16", ":6:"]),
    ("bad_optimizer", _good(**{"max_steps = 2": 'max_steps = 2\noptim = "adamw_9bit"'}), ["adamw_9bit", "paged_adamw_8bit"]),
    ("zero_rank", _good(**{"[training]": "[lora]\nr = 0\n[training]"}), ["lora.r", "positive"]),
    ("eval_without_data", _good(**{"max_steps = 2": 'max_steps = 2\neval_strategy = "steps"'}),
     ["eval_dataset", "eval_fraction"]),
    ("missing_data_file", _good(**{str(DATA): "/nonexistent/data.jsonl"}), ["data.path", "does not exist", ":6"]),
    ("missing_model_dir", _good(**{'"loratui:tiny"': '"/nonexistent/model"'}), ["model directory", "--model-path"]),
    ("bad_attention", _good(**{'path = "loratui:tiny"': 'path = "loratui:tiny"\nattn_implementation = "flash"'}),
     ["model.attn_implementation", "sdpa"]),
    ("fp16_with_bf16_compute", _good(**{"[training]": "[quantization]\nload_in_4bit = true\n[training]\nfp16 = true"}),
     ["training.fp16", "unscale"]),
    ("warn_line_negative", _good() + "[monitor]\nwarn_gb = -1\n", ["monitor.warn_gb", "positive"]),
    ("huge_rank", _good(**{"[training]": "[lora]\nr = 100000000000000000000\n[training]"}),
     ["lora.r", ":4:", "too large"]),
    ("rank_wider_than_layers", _good(**{"[training]": "[lora]\nr = 100000\n[training]"}), ["lora.r", "4096"]),
    ("infinite_alpha", _good(**{"[training]": "[lora]\nlora_alpha = inf\n[training]"}),
     ["lora.lora_alpha", "finite"]),
    ("negative_max_steps", _good(**{"max_steps = 2": "max_steps = -5"}), ["training.max_steps", ":4:", "-1"]),
    ("output_dir", _good(**{"max_steps = 2": 'max_steps = 2\noutput_dir = "out"'}),
     ["training.output_dir", ":5:", "run directory", "remove output_dir"]),
    ("huge_max_length", _good() + "max_length = 100000000\n", ["data.max_length", "1048576"]),
]


@pytest.mark.parametrize("name,text,fragments", BAD, ids=[b[0] for b in BAD])
def test_bad_recipe_one_clear_message(tmp_path: Path, name: str, text: str, fragments: list[str]) -> None:
    recipe = tmp_path / f"{name}.toml"
    recipe.write_text(text)
    result = loratui("run", str(recipe), "--headless", "--runs-dir", str(tmp_path / "runs"), timeout=600)
    assert result.returncode == 2, result.stderr
    message = result.stderr.strip()
    assert message.count("\n") == 0 and "Traceback" not in message, message
    assert str(recipe) in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_missing_recipe_file(tmp_path: Path) -> None:
    result = loratui("run", str(tmp_path / "nope.toml"), "--headless")
    assert result.returncode == 2 and "no such recipe file" in result.stderr


def test_find_key_line_ignores_other_sections() -> None:
    text = "[model]\npath = 'a'\n[data]\npath = 'b'\n"
    assert find_key_line(text, "data.path") == 4
    assert find_key_line(text, "model.path") == 2


def test_error_is_a_recipe_error(tmp_path: Path) -> None:
    with pytest.raises(RecipeError):
        load_recipe(tmp_path / "x.toml", text="[training]\nmax_steps = 'x'\n")


def test_minus_one_is_the_only_negative_max_steps() -> None:
    text = _good(**{"max_steps = 2": "max_steps = -1\nnum_train_epochs = 1"})
    assert load_recipe(Path("x.toml"), text=text).training.max_steps == -1


def test_checkpoints_are_kept_unless_the_recipe_says_otherwise() -> None:
    """As TrainingArguments: no hidden save_total_limit rotating away checkpoints saved with `s`."""
    assert load_recipe(Path("x.toml"), text=_good()).training.save_total_limit is None


def test_model_path_override_is_applied_before_the_checks() -> None:
    text = _good(**{'path = "loratui:tiny"': ""})
    with pytest.raises(RecipeError, match="--model-path"):
        load_recipe(Path("x.toml"), text=text)
    assert load_recipe(Path("x.toml"), text=text, model_path="/m").model.path == "/m"
    assert load_recipe(Path("x.toml"), text=_good(), max_steps=7).training.max_steps == 7


def test_estimate_takes_model_path_for_a_recipe_without_one(tmp_path: Path) -> None:
    from loratui.cli import main

    model = write_model_config(tmp_path / "model")
    recipe = tmp_path / "r.toml"
    recipe.write_text(_good(**{'path = "loratui:tiny"': ""}))
    assert main(["estimate", str(recipe), "--model-path", str(model), "--json"]) in (0, 1)


@pytest.mark.parametrize("text", ["", "   \n\n", "# my recipe, to fill in\n", "\ufeff"])
def test_an_empty_recipe_is_called_empty_and_points_at_an_example(tmp_path: Path, text: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Trial 14: an empty recipe file said "`model.path`: no model given: set [model] path", as if the rest were
    there; `run` and `estimate` say it once, with the file, and where an example comes from."""
    from loratui.cli import main

    path = tmp_path / "mine.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RecipeError, match=rf"^{re.escape(str(path))}: the recipe is empty .*loratui init tiny"):
        load_recipe(path)
    for command in (["estimate", str(path)], ["run", str(path), "--headless", "--runs-dir", str(tmp_path / "runs")]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert "the recipe is empty" in err and "no model given" not in err and "Traceback" not in err, err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_key_set_twice_names_both_lines(tmp_path: Path) -> None:
    """Newcomer trial 15, the README's NaN demo: `dtype = "float16"` added under [model] above the copied recipe's
    own `dtype = "float32"` said "not valid TOML: Cannot overwrite a value (at line 12, column 18)"."""
    path = tmp_path / "nan.toml"
    text = (REPO / "recipes" / "tiny.toml").read_text().replace("[model]\n", '[model]\ndtype = "float16"\n', 1)
    path.write_text(text)
    first = text.splitlines().index('dtype = "float16"') + 1
    second = next(n for n, line in enumerate(text.splitlines(), start=1) if line.startswith('dtype = "float32"'))
    with pytest.raises(RecipeError, match=rf"^{re.escape(str(path))}:{second}: `model.dtype` is set twice "
                                          rf"\(lines {first} and {second}\); keep the one you mean$"):
        load_recipe(path)
