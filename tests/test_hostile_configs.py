"""`A` on a hostile config (issue 25 item 17): an alias bomb, 100k-deep nesting, a 5000-digit value get one
clear refusal naming the file and line, in bounded time and memory (each case runs in a subprocess under
an address-space limit and a timeout, so a regression fails instead of freezing the suite); a UTF-8 byte
order mark is accepted in YAML, JSON and TOML."""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from loratui import bounds, rundir
from loratui.recipe import load_recipe
from loratui.supervisor.restart import write_fix, write_fixed_recipe
from tests.conftest import REPO
from tests.test_apply_advice import _fake_run
from tests.test_config_fix import LLAMAFACTORY_YAML, MEMORY_MOVES, _fix, _watched_run

DEEP = 100_000
MEMORY = 1 << 30


def _bomb(per_level: int, levels: int) -> str:
    text = 'l0: &l0 ["lol"]\n'
    for level in range(1, levels + 1):
        text += f"l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * per_level) + "]\n"
    return text + "learning_rate: 1.0e-4\n"


HOSTILE_YAML = {
    "alias_bomb": _bomb(9, 9),  # 566 bytes, 9^9 values once expanded
    "narrow_alias_bomb": _bomb(2, 40),  # 2^40 values from 80 aliases
    "deep_flow_list": "a: " + "[" * DEEP + "]" * DEEP + "\n",
    "deep_flow_map": "a: " + "{b: " * DEEP + "1" + "}" * DEEP + "\n",
    "deep_block": "".join(" " * i + f"k{i}:\n" for i in range(2000)) + " " * 2000 + "x: 1\n",
    "long_number": "learning_rate: 1.0e-4\nseed: " + "9" * 5000 + "\n",
}
HOSTILE_JSON = {
    "deep_json": '{"a": ' + "[" * DEEP + "]" * DEEP + "}\n",
    "long_number_json": '{"seed": ' + "9" * 5000 + "}\n",
}
APPLY = r"""
import json, sys
from pathlib import Path
from loratui import rundir
from loratui.errors import ApplyError
from loratui.supervisor.restart import write_fix
try:
    path, _ = write_fix(rundir.RunDir(Path(sys.argv[1])), "vram_near_limit", json.loads(sys.argv[2]))
    print("WROTE", path)
except ApplyError as exc:
    print("REFUSED", exc)
"""


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def _apply_bounded(run_path: Path, fix: dict[str, object]) -> str:
    """`A`'s write in a subprocess under 1 GiB and 60 s: its one line of output."""
    result = subprocess.run([sys.executable, "-c", APPLY, str(run_path), json.dumps(fix)], capture_output=True,
                            text=True, timeout=60, cwd=REPO, preexec_fn=_limit_memory)
    assert result.returncode == 0 and not result.stderr, result.stderr[-2000:]
    return result.stdout.strip()


@pytest.mark.parametrize("name", sorted(HOSTILE_YAML) + sorted(HOSTILE_JSON))
def test_a_hostile_config_is_refused_in_bounded_time_and_memory(tmp_path: Path, name: str) -> None:
    suffix = "json" if name in HOSTILE_JSON else "yaml"
    command = ["llamafactory-cli", "train", f"x.{suffix}"]
    run, config = _watched_run(tmp_path, command, {**HOSTILE_YAML, **HOSTILE_JSON}[name])
    said = _apply_bounded(run.path, _fix({"training.per_device_train_batch_size": 1}, command))
    assert re.fullmatch(rf"REFUSED {re.escape(str(config))}:\d+: .+ fix the file .+", said), said
    assert len(said) < 400 and sorted(p.name for p in config.parent.iterdir()) == [config.name]


@pytest.mark.parametrize("suffix", ["yaml", "json"])
def test_a_config_with_a_byte_order_mark_gets_its_fix(tmp_path: Path, suffix: str) -> None:
    command = ["llamafactory-cli", "train", f"x.{suffix}"]
    text = LLAMAFACTORY_YAML if suffix == "yaml" else json.dumps(yaml.safe_load(LLAMAFACTORY_YAML), indent=2)
    run, config = _watched_run(tmp_path, command, "\ufeff" + text)
    path, _ = write_fix(run, "vram_near_limit", _fix(MEMORY_MOVES, command))
    fixed = path.read_text(encoding="utf-8")
    assert fixed.startswith("\ufeff") and fixed.count("\ufeff") == 1
    data = yaml.safe_load(fixed)  # PyYAML (as LLaMA-Factory reads it) skips the mark; JSON is YAML
    assert data["per_device_train_batch_size"] == 1 and data["learning_rate"] == 1e-4


def test_a_recipe_with_a_byte_order_mark_loads_and_takes_a_fix(tmp_path: Path) -> None:
    run, source = _fake_run(tmp_path)
    for path in (source, run.recipe):
        path.write_text("\ufeff" + path.read_text())
    rundir.seal(run)  # the run's recipe copy was saved with its mark, as this user's loratui would have
    assert load_recipe(source).training.per_device_train_batch_size != 2
    fixed, _ = write_fixed_recipe(run, "vram_near_limit", {"training.per_device_train_batch_size": 2})
    assert load_recipe(fixed).training.per_device_train_batch_size == 2


def test_data_that_contains_itself_is_refused() -> None:
    """ruamel leaves a self-reference as None; the bound still refuses a cycle whoever builds one."""
    looped: list[object] = [1]
    looped.append(looped)
    with pytest.raises(bounds.Refused, match="contains it"):
        bounds.check_expanded({"a": looped})
