"""A watched `python -I` (or -E, -S) cannot load loratui's startup hook: Python ignores PYTHONPATH or site there, so
no Trainer is hooked and the run is read from printed output alone. Review 7 found it said nothing (a `-E` run ended
"finished at step 0" with its losses only as output); the run's log now says why, once, at the start."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from loratui.logic.command_keys import hook_blocked
from tests.conftest import kinds, loratui, only_run


@pytest.mark.parametrize(("command", "flags"), [
    (["python", "-I", "train.py"], "-I"),
    (["/usr/bin/python3.11", "-E", "-u", "train.py"], "-E"),
    (["python3", "-SB", "-c", "print(1)"], "-S"),
    (["python", "-X", "importtime", "-I", "-m", "train"], "-I"),
    (["python", "-IS", "train.py"], "-I -S"),
])
def test_options_that_keep_the_hook_out_are_named(command: list[str], flags: str) -> None:
    assert hook_blocked(command) == flags


@pytest.mark.parametrize("command", [
    ["python", "train.py", "-I"],  # the script's own option, not Python's
    ["python", "-c", "import sys", "-E"],
    ["python", "-u", "-m", "torch.distributed.run", "-S"],
    ["torchrun", "-I", "train.py"],  # not a Python interpreter's options
    ["python", "-W", "ignore", "train.py"],
    ["python3.11", "-X", "dev", "train.py"],
])
def test_other_options_and_the_scripts_own_are_left_alone(command: list[str]) -> None:
    assert hook_blocked(command) == ""


def test_a_watched_python_minus_i_is_told_in_its_log(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    result = loratui("run", "--headless", "--runs-dir", str(runs), "--", sys.executable, "-I", "-c", "print('hi')",
                     timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    notices = [e for e in kinds(only_run(runs), "notice") if e.get("key") == "hook_blocked"]
    assert len(notices) == 1 and "-I" in str(notices[0]["message"]), notices
    assert "printed output" in str(notices[0]["message"])
