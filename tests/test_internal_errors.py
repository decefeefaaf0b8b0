"""Inputs that gave "internal error" or a wrong answer (issue 25 item 18): deep recipes, deep or absurd
trainer_state.json in import and replay, `estimate --gpu-gb nan`, a 10 MB recipe value echoed whole, a
UTF-16 event log called "no problems found". Each now gets one clear line (exit 2), in bounded memory."""

from __future__ import annotations

import json
import resource
from pathlib import Path

import pytest

from loratui.eventlog import EventWriter
from tests import scenarios
from tests.conftest import TINY, loratui

DEEP = 100_000
MEMORY = 2 << 30


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def _refused(*args: str) -> str:
    """The one stderr line of a command that must refuse its input (exit 2) within 2 GiB and 120 s."""
    result = loratui(*args, timeout=120, preexec_fn=_limit_memory)
    assert result.returncode == 2, (args, result.returncode, result.stderr[-2000:])
    assert result.stderr.count("\n") == 1 and "internal error" not in result.stderr, result.stderr[-2000:]
    return result.stderr


RECIPE = TINY.read_text().replace('path = "data/', f'path = "{TINY.parent}/data/')
DEEP_RECIPES = {
    "deep_array": RECIPE + "\n[x]\na = " + "[" * DEEP + "]" * DEEP + "\n",
    "deep_inline_table": RECIPE + "\n[x]\na = " + "{b = " * DEEP + "1" + "}" * DEEP + "\n",
    "dotted_key": RECIPE + "\n[x]\n" + "a." * DEEP + "b = 1\n",  # killed for memory before the fix
    "long_number": RECIPE.replace("seed = 0", "seed = " + "9" * 5000),
}


@pytest.mark.parametrize("name", sorted(DEEP_RECIPES))
def test_a_deep_recipe_is_refused_by_estimate_and_run(tmp_path: Path, name: str) -> None:
    recipe = tmp_path / f"{name}.toml"
    recipe.write_text(DEEP_RECIPES[name])
    for args in (["estimate", str(recipe)], ["run", str(recipe), "--headless", "--runs-dir", str(tmp_path / "r")]):
        said = _refused(*args)
        assert said.startswith(f"loratui: {recipe}:") and "fix" in said, said


def _states(tmp_path: Path) -> dict[str, Path]:
    deep = tmp_path / "deep" / "trainer_state.json"
    huge = tmp_path / "huge" / "trainer_state.json"
    output_dir = tmp_path / "out"
    for path in (deep, huge, output_dir / "checkpoint-10" / "trainer_state.json"):
        path.parent.mkdir(parents=True)
    deep.write_text('{"log_history": ' + "[" * DEEP + "]" * DEEP + "}")
    (output_dir / "checkpoint-10" / "trainer_state.json").write_text(deep.read_text())
    huge.write_text(json.dumps({"log_history": [{"step": 1e308, "loss": 1.0}, {"step": 10**30, "loss": 2.0},
                                                {"step": 3, "loss": 0.5}], "max_steps": 10**30})
                    .replace("1e+308", "1e308"))
    return {"deep": deep, "huge": huge, "output_dir": output_dir}


def test_deep_and_absurd_trainer_states_in_import_and_replay(tmp_path: Path) -> None:
    states = _states(tmp_path)
    for name in ("deep", "output_dir"):
        for args in (["import", str(states[name])], ["replay", str(states[name]), "--summary"]):
            assert "nested deeper than any trainer_state.json" in _refused(*args, "--runs-dir", str(tmp_path / "r"))
    summary = loratui("replay", str(states["huge"]), "--summary", timeout=120, preexec_fn=_limit_memory)
    assert summary.returncode == 0 and "internal error" not in summary.stderr, summary.stderr
    assert json.loads(summary.stdout)["last_loss"] == 0.5  # the absurd steps are not taken as steps
    imported = loratui("import", str(states["huge"]), "--runs-dir", str(tmp_path / "r"), timeout=120)
    assert imported.returncode == 0, imported.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0"])
def test_estimate_refuses_a_card_size_that_is_no_number(value: str) -> None:
    said = _refused("estimate", str(TINY), f"--gpu-gb={value}")
    assert f"--gpu-gb {float(value)}" in said and "positive number of GiB" in said


def test_a_10_mb_recipe_value_is_cut_in_the_message(tmp_path: Path) -> None:
    recipe = tmp_path / "huge.toml"
    recipe.write_text(RECIPE.replace('optim = "adamw_torch"', 'optim = "' + "x" * 10_000_000 + '"'))
    said = _refused("estimate", str(recipe))
    line = RECIPE.splitlines().index('optim = "adamw_torch"') + 1  # the recipe's header comments may change
    assert len(said) < 2100 and said.startswith(f"loratui: {recipe}:{line}: `training.optim`")
    assert "characters cut" in said


def test_a_utf16_event_log_is_named_not_passed_as_healthy(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    writer = EventWriter(log)
    for event in scenarios.nan_run():
        writer.write(event)
    writer.close()
    saved = tmp_path / "saved-by-notepad.jsonl"
    saved.write_bytes(log.read_text().encode("utf-16"))
    for args in (["doctor", str(saved)], ["replay", str(saved), "--summary"], ["import", str(saved)]):
        said = _refused(*args, "--runs-dir", str(tmp_path / "r"))
        assert "saved as UTF-16" in said and "iconv -f utf-16 -t utf-8" in said, said
