"""A run whose trainer the guard stopped for a bad loss, and then did not restart (a crash loop), failed: it does not
end `finished` (trial 11, the README's NaN demo with `[guard] enabled = true`: a NaN at step 4, a restart at half
the learning rate, a NaN at step 4 again, 'crash loop ... not restarting again', then 'finished at step 5' of 20,
exit code 0). Since session 16 the guard takes that demo's NaN advice (float16 weights -> float32) and it recovers;
a crash loop is now a NaN no move cures (the test-only LORATUI_TEST_NAN_ALWAYS poisons every life's weights)."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.conftest import kinds, loratui, only_run


@pytest.mark.slow
def test_a_crash_loop_on_nan_ends_failed(tmp_path: Path, runs_dir: Path) -> None:
    recipe = tmp_path / "nan.toml"
    assert loratui("init", "tiny", str(recipe)).returncode == 0
    text = recipe.read_text(encoding="utf-8")
    recipe.write_text(text + "\n[guard]\nenabled = true\n", encoding="utf-8")
    env = dict(os.environ, LORATUI_TEST_NAN_AT_STEP="4", LORATUI_TEST_NAN_ALWAYS="1")
    result = loratui("run", str(recipe), "--headless", "--max-steps", "20", "--runs-dir", str(runs_dir), timeout=600,
                     env=env)
    run = only_run(runs_dir)
    verdicts = [str(e["message"]) for e in kinds(run, "notice") if e.get("key") == "guard_verdict"]
    assert any(v.startswith("crash loop: ") for v in verdicts), verdicts
    end = kinds(run, "end")[-1]
    assert end["state"] == "failed" and str(end["error"]).startswith("crash loop: "), end
    assert result.returncode == 1 and "failed at step" in result.stdout, result.stdout[-3000:]


@pytest.mark.slow
def test_the_readmes_nan_demo_under_the_guard_recovers_with_the_advices_dtype(tmp_path: Path, runs_dir: Path) -> None:
    """float16 weights with no mixed precision NaN at any rate (0.9, 0.3, 0.1 each at step 4): the guard takes the NaN
    advice's own move, model.dtype, and the restarted run trains on."""
    recipe = tmp_path / "nan.toml"
    assert loratui("init", "tiny", str(recipe)).returncode == 0
    text = recipe.read_text(encoding="utf-8")
    text = re.sub(r'(?m)^dtype = .*$', 'dtype = "float16"', text, count=1)  # the README's NaN demo
    text = re.sub(r"(?m)^learning_rate = .*$", "learning_rate = 0.9", text, count=1)
    recipe.write_text(text + "\n[guard]\nenabled = true\n", encoding="utf-8")
    result = loratui("run", str(recipe), "--headless", "--max-steps", "20", "--runs-dir", str(runs_dir), timeout=600)
    run = only_run(runs_dir)
    actions = [str(e["message"]) for e in kinds(run, "notice") if e.get("key") == "guard"]
    assert actions and "model.dtype = 'float32'" in actions[0], actions
    verdicts = [str(e["message"]) for e in kinds(run, "notice") if e.get("key") == "guard_verdict"]
    assert any("recovered" in v and "NOT" not in v for v in verdicts), verdicts
    assert kinds(run, "end")[-1]["state"] == "finished" and result.returncode == 0, result.stdout[-3000:]
