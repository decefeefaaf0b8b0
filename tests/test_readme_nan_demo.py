"""The README's way to provoke a NaN on `tiny` gives one (trial 11: there was no documented cheap way to see the
NaN notice, the advice and `doctor` at work; measured, not assumed)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO, kinds, loratui, only_run

README = (REPO / "README.md").read_text(encoding="utf-8")


def _demo() -> tuple[str, str, str]:
    """The settings and the command the README gives (its paragraph, read, so a change to it is tested)."""
    said = re.search(r"To see a NaN caught.*?\n\n", README, re.S)
    assert said, "the README's NaN demo is gone"
    text = " ".join(said.group(0).split())
    dtype = re.search(r'set `dtype = "(\w+)"` under `\[model\]`', text)
    rate = re.search(r"`learning_rate = ([\d.e-]+)` under `\[training\]`", text)
    steps = re.search(r"`loratui run nan\.toml --headless --max-steps (\d+)`", text)
    assert dtype and rate and steps, text
    return dtype.group(1), rate.group(1), steps.group(1)


def test_the_readme_says_how() -> None:
    assert _demo() == ("float16", "0.9", "10")


@pytest.mark.slow
def test_the_readme_settings_give_a_nan_on_tiny(tmp_path: Path, runs_dir: Path) -> None:
    dtype, rate, steps = _demo()
    recipe = tmp_path / "nan.toml"
    assert loratui("init", "tiny", str(recipe)).returncode == 0
    text = recipe.read_text(encoding="utf-8")
    text = re.sub(r'(?m)^dtype = .*$', f'dtype = "{dtype}"', text, count=1)
    text = re.sub(r'(?m)^learning_rate = .*$', f"learning_rate = {rate}", text, count=1)
    recipe.write_text(text, encoding="utf-8")
    result = loratui("run", str(recipe), "--headless", "--max-steps", steps, "--runs-dir", str(runs_dir), timeout=600)
    assert "advice: Loss became nan at step" in result.stdout, result.stdout[-3000:] + result.stderr[-2000:]
    run = only_run(runs_dir)
    losses = [e["values"].get("loss") for e in kinds(run, "log") if isinstance(e.get("values"), dict)]  # type: ignore[union-attr]
    assert any(isinstance(v, str) and v.lower() in ("nan", "inf", "-inf") for v in losses), losses
    doctor = loratui("doctor", str(run))
    assert "nan_loss" in doctor.stdout, doctor.stdout
