"""`A` in the app: the advice's change goes into a new recipe beside the old one; restart resumes."""

from __future__ import annotations

from pathlib import Path

import pytest

from loratui import rundir
from loratui.errors import ApplyError
from loratui.supervisor.restart import restart_with, write_fixed_recipe
from loratui.recipe import load_recipe
from loratui.supervisor import control
from loratui.sources.runlog import ListSource
from loratui.tui.app import LoratuiApp, RunActions
from tests import scenarios
from tests.conftest import REPO, TINY, kinds, only_run, wait_for
from tests.test_run import _start_detached_recipe


def _fake_run(tmp_path: Path) -> tuple[rundir.RunDir, Path]:
    source = tmp_path / "recipes" / "qwen7b.toml"
    source.parent.mkdir()
    text = (REPO / "recipes" / "qwen7b.toml").read_text().replace('path = "data/', f'path = "{REPO}/recipes/data/')
    source.write_text(text)
    settings = rundir.RunSettings(run_id="r1", name="qwen7b", recipe_source=str(source), recipe_dir=str(source.parent))
    return rundir.create(tmp_path / "runs", settings, text), source


def test_write_fixed_recipe_leaves_the_original_alone(tmp_path: Path) -> None:
    run, source = _fake_run(tmp_path)
    before = source.read_text()
    path, env = write_fixed_recipe(run, "vram_near_limit", {"training.per_device_train_batch_size": 2,
                                                            "env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    assert source.read_text() == before and path.parent == source.parent and path.name == "qwen7b.fix-vram_near_limit.toml"
    assert load_recipe(path).training.per_device_train_batch_size == 2
    assert env == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    again, _ = write_fixed_recipe(run, "vram_near_limit", {"training.per_device_train_batch_size": 1})
    assert again.name == "qwen7b.fix-vram_near_limit-2.toml"
    with pytest.raises(ApplyError):
        write_fixed_recipe(run, "loss_flat", {})


async def test_key_A_writes_the_recipe_and_asks_before_restarting(tmp_path: Path) -> None:
    run, source = _fake_run(tmp_path)
    sent: list[str] = []
    actions = RunActions(send=sent.append, write_fix=lambda advice_id, change: write_fixed_recipe(run, advice_id, change),
                         restart=lambda recipe, env, send: restart_with(run, recipe, env, send))
    app = LoratuiApp(ListSource(scenarios.run(60, peak_gib=33.5)), load_recipe(source), actions=actions)
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(60):
            await pilot.pause(0.1)
            if app.advisor.items():
                break
        await pilot.pause(1.2)
        assert app.check_action("apply_advice", ())
        await pilot.press("a", "A")
        await pilot.pause(0.3)
        assert app.screen.__class__.__name__ == "Choice"
        await pilot.press("n")
        await pilot.pause(0.2)
    written = sorted(source.parent.glob("qwen7b.fix-*.toml"))
    assert len(written) == 1 and sent == []
    assert load_recipe(written[0]).training.per_device_train_batch_size == 2


@pytest.mark.slow
def test_restart_resumes_from_the_last_checkpoint(tmp_path: Path, runs_dir: Path) -> None:
    recipe = tmp_path / "tiny.toml"
    recipe.write_text(TINY.read_text().replace('path = "data/', f'path = "{REPO}/recipes/data/')
                      .replace("save_steps = 60", "save_steps = 10"))
    viewer = _start_detached_recipe(recipe, runs_dir, "--max-steps", "3000")
    first = wait_for(lambda: runs_dir.exists() and any(runs_dir.iterdir()) and only_run(runs_dir))
    wait_for(lambda: kinds(first, "checkpoint"), timeout=120)  # type: ignore[arg-type]
    run = rundir.RunDir(first)  # type: ignore[arg-type]
    fixed, env = write_fixed_recipe(run, "loss_diverging", {"training.learning_rate": 1e-3})
    new = restart_with(run, fixed, env, lambda command: control.send(run.control, command))
    viewer.communicate(timeout=60)
    assert kinds(run.path, "end")[0]["state"] == "stopped"
    begin = wait_for(lambda: kinds(new.path, "train_begin"), timeout=120)
    assert begin[0]["start_step"] >= 10  # type: ignore[index]
    assert new.read_settings().resume_from and "checkpoint-" in new.read_settings().resume_from  # type: ignore[operator]
    control.send(new.control, "stop")
    wait_for(lambda: kinds(new.path, "end"), timeout=60)
