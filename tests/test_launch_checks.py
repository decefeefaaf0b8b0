"""What `loratui run` refuses before anything starts: no run directory is left, one message names the
user's recipe (file:line), the data file and its real line, and says what to do."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from loratui.logic.lora_targets import module_names, tiny_module_names, unmatched
from loratui.recipe import RecipeError
from loratui.supervisor import launch
from tests.conftest import REPO, loratui, write_model_config

DATA = REPO / "recipes" / "data" / "tiny-instructions.jsonl"
RECIPE = """\
[model]
path = "loratui:tiny"

[lora]
target_modules = ["q_proj", "v_proj"]

[training]
max_steps = 2

[data]
path = "{data}"
format = "{format}"
"""
DATA_LINE = 11  # the line of `path` under [data] in RECIPE


def _recipe(tmp_path: Path, data: Path | str, fmt: str = "instruction", **replace: str) -> Path:
    text = RECIPE.format(data=data, format=fmt)
    for old, new in replace.items():
        text = text.replace(old, new)
    path = tmp_path / "mine.toml"
    path.write_text(text)
    return path


def _refused(recipe: Path, tmp_path: Path, model_path: str | None = None) -> str:
    runs = tmp_path / "runs"
    with pytest.raises(RecipeError) as caught:
        launch.start_run(recipe, runs, model_path=model_path)
    assert not runs.exists() or not any(runs.iterdir())  # nothing left behind
    message = str(caught.value)
    assert "\n" not in message and "runs/" not in message
    return message


def _rows(n: int) -> list[str]:
    return [json.dumps({"instruction": f"say {i}", "output": str(i)}) for i in range(n)]


def test_a_broken_jsonl_line_is_named_by_its_real_line(tmp_path: Path) -> None:
    data = tmp_path / "train.jsonl"
    lines = _rows(20)
    lines.insert(5, "")  # a blank line: the broken one below is line 22 of the file, example 21
    lines.append('{"instruction": "x", "output": }')
    data.write_text("\n".join(lines) + "\n")
    message = _refused(_recipe(tmp_path, data), tmp_path)
    assert f"mine.toml:{DATA_LINE}" in message and f"{data}:22:" in message
    assert "not valid JSON" in message and "fix or remove this line" in message


def test_an_empty_data_file(tmp_path: Path) -> None:
    data = tmp_path / "train.jsonl"
    data.write_text("\n\n")
    message = _refused(_recipe(tmp_path, data), tmp_path)
    assert str(data) in message and "no examples" in message and '"instruction"' in message


def test_non_utf8_bytes(tmp_path: Path) -> None:
    data = tmp_path / "train.jsonl"
    data.write_bytes(("\n".join(_rows(2)) + "\n").encode() + '{"instruction": "caf\xe9", "output": "x"}\n'.encode("latin-1"))
    message = _refused(_recipe(tmp_path, data), tmp_path)
    assert f"{data}:3:" in message and "UTF-8" in message and "0xe9" in message


@pytest.mark.parametrize("fmt,row,fragments", [
    ("instruction", {"prompt": "a", "response": "b"}, ["no field 'instruction'", "instruction_field"]),
    ("instruction", {"instruction": "a", "answer": "b"}, ["no field 'output'", "output_field"]),
    ("text", {"body": "a"}, ["no field 'text'", "text_field"]),
    ("chat", {"messages": "hello"}, ["'messages' must be a list"]),
])
def test_missing_fields_for_the_format(tmp_path: Path, fmt: str, row: dict[str, str], fragments: list[str]) -> None:
    data = tmp_path / "train.jsonl"
    data.write_text(json.dumps(row) + "\n")
    message = _refused(_recipe(tmp_path, data, fmt), tmp_path)
    assert f"{data}:1:" in message and f'format = "{fmt}"' in message or fmt == "chat"
    for fragment in fragments:
        assert fragment in message, message


def test_csv_without_the_column(tmp_path: Path) -> None:
    data = tmp_path / "train.csv"
    data.write_text("instruction,answer\nsay 1,1\n")
    message = _refused(_recipe(tmp_path, data), tmp_path)
    assert f"{data}:2:" in message and "output_field" in message


def test_data_path_that_is_a_directory(tmp_path: Path) -> None:
    message = _refused(_recipe(tmp_path, tmp_path), tmp_path)
    assert "data.path" in message and "is a directory" in message


def test_target_modules_the_tiny_model_lacks(tmp_path: Path) -> None:
    recipe = _recipe(tmp_path, DATA, **{'["q_proj", "v_proj"]': '["q_proj", "c_attn"]'})
    message = _refused(recipe, tmp_path)
    assert "mine.toml:5" in message and "'c_attn'" in message and "q_proj" in message and "all-linear" in message


def _safetensors(path: Path, names: list[str]) -> None:
    """A weights file with `names` (empty tensors): only its header is read."""
    header = {name: {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for name in names}
    blob = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob)


def test_target_modules_a_local_model_lacks(tmp_path: Path) -> None:
    model = tmp_path / "gpt"
    model.mkdir()
    (model / "config.json").write_text("{}")
    _safetensors(model / "model.safetensors", ["transformer.h.0.attn.c_attn.weight", "transformer.wte.weight"])
    message = _refused(_recipe(tmp_path, DATA, **{'"loratui:tiny"': f'"{model}"'}), tmp_path)
    assert "'q_proj', 'v_proj'" in message and "c_attn" in message
    good = _recipe(tmp_path, DATA, **{'"loratui:tiny"': f'"{model}"', '["q_proj", "v_proj"]': '["attn.c_attn"]'})
    launch.check_paths(launch.load_recipe(good), good, None)  # a dotted suffix matches, as in peft


def test_model_path_on_the_command_line_fills_a_recipe_without_one(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    _safetensors(model / "model.safetensors", ["model.layers.0.self_attn.q_proj.weight",
                                               "model.layers.0.self_attn.v_proj.weight"])
    recipe = _recipe(tmp_path, DATA, **{'path = "loratui:tiny"': ""})
    assert "--model-path" in _refused(recipe, tmp_path)
    monkeypatch.setattr(launch, "spawn_supervisor", lambda run, **kwargs: 0)
    run = launch.start_run(recipe, tmp_path / "runs", model_path=str(model))
    loaded, why = run.load_recipe()  # what the supervisor and the trainer load
    assert loaded is not None and loaded.model.path == str(model), why


def test_refusals_reach_the_user_as_one_line_and_exit_2(tmp_path: Path) -> None:
    data = tmp_path / "train.jsonl"
    data.write_text("\n".join(_rows(3)) + "\n[1, 2]\n")
    result = loratui("run", str(_recipe(tmp_path, data)), "--headless", "--runs-dir", str(tmp_path / "runs"),
                     timeout=300)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert f"{data}:4:" in result.stderr and "not an object" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_peft_suffix_and_regex_matching() -> None:
    names = module_names(["model.layers.0.self_attn.q_proj.weight", "model.embed_tokens.weight"])
    assert unmatched(["q_proj", "self_attn.q_proj", "lm_head", "k_proj"], names) == ["k_proj"]
    assert unmatched(r".*\.q_proj", names) == [] and unmatched(r".*\.k_proj", names) == [r".*\.k_proj"]
    assert unmatched("all-linear", set()) == []


def test_tiny_module_names_are_the_built_models() -> None:
    """The names the check uses for the embedded model without building it are the real model's."""
    from transformers import AutoModelForCausalLM

    from loratui.trainer.tiny import ensure_tiny_model

    model = AutoModelForCausalLM.from_pretrained(ensure_tiny_model())
    assert {name for name, _ in model.named_modules() if name} == tiny_module_names()


def test_the_trainer_reads_the_same_line_numbers(tmp_path: Path) -> None:
    from loratui.recipe import DataSection
    from loratui.trainer.data import DataError, load_rows

    data = tmp_path / "train.jsonl"
    data.write_text("\n".join(_rows(3)) + "\n\n{oops\n")
    with pytest.raises(DataError, match=f"{data}:5: not valid JSON"):
        load_rows(DataSection(path=str(data), format="instruction"), tmp_path)
    assert len(load_rows(DataSection(path=str(data), format="instruction", max_samples=2), tmp_path)) == 2


def test_the_preflight_takes_model_path_for_a_recipe_without_one(tmp_path: Path) -> None:
    import argparse

    from loratui.commands import launch_checks

    model = write_model_config(tmp_path / "model")
    recipe = _recipe(tmp_path, DATA, **{'path = "loratui:tiny"': ""})
    args = argparse.Namespace(recipe=recipe, model_path=str(model), force=False)
    assert launch_checks.preflight(args) in (True, False)  # answered, not refused for a missing [model] path


def test_a_model_directory_without_weights_is_refused_before_the_start(tmp_path: Path) -> None:
    """`loratui run qwen7b --model-path DIR` on a directory holding config.json alone (a download of the config,
    the folder above a snapshot) started a run that loaded for a while and failed on transformers' OSError,
    with a traceback and advice to check the installed transformers version."""
    model = write_model_config(tmp_path / "model")
    recipe = _recipe(tmp_path, DATA, **{'path = "loratui:tiny"': ""})
    message = _refused(recipe, tmp_path, model_path=str(model))
    assert message.startswith("--model-path: `model.path`: ") and str(model) in message, message
    assert "no weights" in message and "model.safetensors" in message, message
    _safetensors(model / "model.safetensors", ["model.layers.0.self_attn.q_proj.weight",
                                               "model.layers.0.self_attn.v_proj.weight"])
    launch.check_paths(launch.load_recipe(recipe, model_path=str(model)), recipe, str(model))  # now it serves
