"""`loratui estimate`: offline for the shipped recipes' hub models, 'tight' inside the error band, and the
exit-code policy (0 fits or tight, 1 does not fit, 2 bad input)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from loratui.commands.estimate import verdict
from tests.conftest import REPO, loratui, write_model_config


def test_a_shipped_recipe_with_a_hub_id_is_estimated_offline() -> None:
    result = loratui("estimate", str(REPO / "recipes" / "qwen7b.toml"), env={"HF_HUB_OFFLINE": "1", "PATH": ""})
    assert result.returncode == 0, result.stderr
    assert "Qwen--Qwen2.5-7B-Instruct.json" in result.stdout and "fits" in result.stdout


def test_a_recipe_that_does_not_fit_exits_1() -> None:
    result = loratui("estimate", str(REPO / "recipes" / "qwen32b-qlora.toml"), "--gpu-gb", "16")
    assert result.returncode == 1 and "does NOT fit" in result.stdout


def test_bad_input_exits_2() -> None:
    result = loratui("estimate", str(REPO / "recipes" / "qwen7b.toml"), "--gpu-gb", "-1")
    assert result.returncode == 2 and "Traceback" not in result.stderr


@pytest.mark.parametrize(("peak", "card", "warn", "said"), [
    (20.0, 32.0, 30.0, "fits"),
    (28.0, 32.0, 30.0, "tight"),   # 28 +10% crosses the 30 GiB line
    (30.5, 32.0, 40.0, "tight"),   # crosses the card
    (36.0, 32.0, 30.0, "does NOT fit"),
])
def test_fits_is_never_said_inside_the_error_band(peak: float, card: float, warn: float, said: str) -> None:
    result = SimpleNamespace(peak_device_gib=peak, uncertainty=0.10, gpu_gib=card)
    assert verdict(result, warn) == said


def test_the_estimate_says_the_batch_and_length_it_is_for(tmp_path) -> None:
    """`estimate tiny` said 47 MiB on CPU where the run's pane said 36 MiB, and nothing said why: the command
    estimates at [data] max_length, the run at its data's longest example. The command says which."""
    model = write_model_config(tmp_path / "model")
    result = loratui("estimate", "tiny", "--model-path", str(model))
    assert result.returncode == 0, result.stderr
    assert "batch 8 x 64 tokens ([data] max_length)" in result.stdout, result.stdout
    assert "(a run estimates again at its data's longest example, which may be shorter)" in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()[1:3]) <= 80, result.stdout


@pytest.mark.parametrize(("key", "value", "said"), [
    ("hidden_size", "big", 'hidden_size is "big"'),
    ("num_hidden_layers", -2, "num_hidden_layers is -2"),
    ("num_key_value_heads", 2.5, "num_key_value_heads is 2.5"),
])
def test_a_config_dimension_that_is_no_whole_number_is_bad_input(tmp_path, key: str, value: object,
                                                                  said: str) -> None:
    """`"hidden_size": "big"` in the --model-path's config.json ended `estimate` as "internal error: ValueError"
    (exit 1, a crash file); a negative layer count was estimated as if it were a model."""
    from tests.conftest import SMALL_QWEN2
    model = write_model_config(tmp_path / "model", {**SMALL_QWEN2, key: value})
    result = loratui("estimate", "tiny", "--model-path", str(model))
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert said in result.stderr and "not a positive whole number" in result.stderr, result.stderr
    assert "config.json" in result.stderr and "internal error" not in result.stderr
