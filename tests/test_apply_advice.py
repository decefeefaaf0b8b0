"""`A` in the app: the advice's change goes into a new recipe beside the old one; restart resumes."""

from __future__ import annotations

from pathlib import Path

import pytest

from loratui import rundir
from loratui.errors import ApplyError
from loratui.recipe import load_recipe
from loratui.sources.runlog import ListSource
from loratui.supervisor import control
from loratui.supervisor.restart import restart_with, write_fixed_recipe
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
    viewer.communicate(timeout=300)
    assert kinds(run.path, "end")[0]["state"] == "stopped"
    begin = wait_for(lambda: kinds(new.path, "train_begin"), timeout=120)
    assert begin[0]["start_step"] >= 10  # type: ignore[index]
    assert new.read_settings().resume_from and "checkpoint-" in new.read_settings().resume_from  # type: ignore[operator]
    control.send(new.control, "stop")
    wait_for(lambda: kinds(new.path, "end"), timeout=60)


def test_a_dangling_symlink_at_the_next_name_is_never_written_through(tmp_path: Path) -> None:
    run, source = _fake_run(tmp_path)
    victim = tmp_path / "elsewhere" / "victim.toml"
    link = source.parent / "qwen7b.fix-vram_near_limit.toml"
    link.symlink_to(victim)  # dangling: `exists()` says False, a plain open would create the victim
    path, _ = write_fixed_recipe(run, "vram_near_limit", {"training.per_device_train_batch_size": 2})
    assert path.name == "qwen7b.fix-vram_near_limit-2.toml" and not path.is_symlink()
    assert not victim.exists() and link.is_symlink()
    assert load_recipe(path).training.per_device_train_batch_size == 2


def _with_env(run: rundir.RunDir, env: dict[str, str]) -> None:
    import msgspec

    settings = msgspec.structs.replace(run.read_settings(), env=env)
    run.settings.write_bytes(msgspec.json.encode(settings))
    rundir.seal(run)  # as this user's loratui made it (an unsealed copy is refused: tests/test_run_dir_trust.py)


def _capture_start(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    from loratui.supervisor import launch

    calls: list[dict[str, object]] = []

    def fake_start(recipe: Path, runs: Path, name: object, model_path: object, max_steps: object,
                   resume_from: object = None, env: object = None, alert_url: object = None,
                   first_env: object = None) -> object:
        calls.append({"recipe": recipe, "resume_from": resume_from, "env": env, "alert_url": alert_url,
                      "first_env": first_env})
        return None

    monkeypatch.setattr(launch, "start_run", fake_start)
    return calls


def test_restart_carries_only_environment_loratui_proposes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run, _ = _fake_run(tmp_path)
    _with_env(run, {"PYTHONPATH": "/tmp/evil", "LD_PRELOAD": "/tmp/evil.so", "PYTORCH_CUDA_ALLOC_CONF": "a:b"})
    path, env = write_fixed_recipe(run, "vram_near_limit", {"training.per_device_train_batch_size": 2})
    assert env == {"PYTORCH_CUDA_ALLOC_CONF": "a:b"}  # what the prompt shows is what the trainer gets
    calls = _capture_start(monkeypatch)
    restart_with(run, path, {**env, "PYTHONPATH": "/tmp/evil"}, lambda command: None)
    assert calls[0]["env"] == {"PYTORCH_CUDA_ALLOC_CONF": "a:b"}
    assert calls[0]["first_env"] is None  # none kept (this run had no supervisor): the base is not the run's env


def test_every_environment_variable_advice_proposes_is_allowed() -> None:
    """Every module of the advisor, and the allocator setting a fragmented cache gets (returned as a pair): a
    variable a restart dropped would be applied in name only (NCCL_P2P_DISABLE and the TensorFlow and JAX
    allocators were proposed but not carried, in modules this test did not read)."""
    import re

    from loratui.logic.recipe_edit import ADVICE_ENV

    advisor = REPO / "loratui" / "logic" / "advisor"
    source = "".join(p.read_text() for p in advisor.glob("*.py"))
    proposed = set(re.findall(r'"env\.([A-Z_0-9]+)"', source)) | set(re.findall(r'return "([A-Z_0-9]+)", "', source))
    assert {"PYTORCH_CUDA_ALLOC_CONF", "NCCL_P2P_DISABLE", "TF_GPU_ALLOCATOR"} <= proposed, proposed
    assert proposed <= ADVICE_ENV, sorted(proposed - ADVICE_ENV)


def test_a_run_directory_of_another_user_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    run, source = _fake_run(tmp_path)
    monkeypatch.setattr(os, "getuid", lambda: os.stat(run.path).st_uid + 1)
    with pytest.raises(ApplyError, match="another user"):
        write_fixed_recipe(run, "vram_near_limit", {"training.per_device_train_batch_size": 2})
    calls = _capture_start(monkeypatch)
    with pytest.raises(ApplyError, match="another user"):
        restart_with(run, source, {}, lambda command: None)
    assert calls == [] and not list(source.parent.glob("*.fix-*"))


def _end(run: rundir.RunDir, state: str, step: int) -> None:
    from loratui import events
    from loratui.eventlog import EventWriter

    writer = EventWriter(run.events)
    writer.write(events.End(t=1.0, state=state, exit_code=0, step=step))
    writer.close()
    (run.checkpoints / f"checkpoint-{step}").mkdir()
    (run.checkpoints / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")  # a complete one


@pytest.mark.parametrize("state,resumes", [("finished", False), ("stopped", True)])
def test_restart_of_a_finished_run_starts_fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                state: str, resumes: bool) -> None:
    """A finished run's last checkpoint is its end: resuming it trained `step 81/80`."""
    run, _ = _fake_run(tmp_path)
    _end(run, state, 80)
    path, env = write_fixed_recipe(run, "loss_diverging", {"training.learning_rate": 1e-4})
    calls = _capture_start(monkeypatch)
    restart_with(run, path, env, lambda command: None)
    assert calls[0]["resume_from"] == (str(run.checkpoints / "checkpoint-80") if resumes else None)


def test_a_restart_alerts_where_the_run_did(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 19: the run a restart with applied advice starts keeps the alert target (`--notify URL`),
    stored as a secret (0600), with no `--notify` given again and none in the environment."""
    import stat

    from loratui.supervisor import alerts, launch

    monkeypatch.setattr(launch, "spawn_supervisor", lambda run, **kw: 0)  # no process: the files
    monkeypatch.delenv(alerts.NOTIFY_ENV, raising=False)
    source = tmp_path / "recipes" / "tiny.toml"
    source.parent.mkdir()
    source.write_text(TINY.read_text().replace('path = "data/', f'path = "{REPO}/recipes/data/'))
    settings = rundir.RunSettings(run_id="r1", name="tiny", recipe_source=str(source),
                                  recipe_dir=str(source.parent))
    run = rundir.create(tmp_path / "runs", settings, source.read_text())
    url = "https://ntfy.sh/tk_5ecret-topic-93f1"
    alerts.save_target(run, url)
    _end(run, "stopped", 3)
    path, env = write_fixed_recipe(run, "loss_diverging", {"training.learning_rate": 1e-4})
    new = restart_with(run, path, env, lambda command: None)
    assert new.path != run.path and alerts.saved_target(new) == url
    assert stat.S_IMODE(new.alerts.stat().st_mode) == 0o600
    assert not any("tk_5ecret" in p.read_text(errors="replace") for p in new.path.rglob("*") if p.is_file())


def test_the_restart_prompt_shows_every_change() -> None:
    from types import SimpleNamespace

    from loratui.tui.screens import restart_choice

    item = SimpleNamespace(change={"training.per_device_train_batch_size": 2,
                                   "env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "NCCL_DEBUG": "INFO"}
    question = restart_choice(Path("/r/x.fix.toml"), item, env).question
    assert "training.per_device_train_batch_size = 2" in question
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in question and "NCCL_DEBUG=INFO" in question
    assert "last checkpoint" in question
    assert "from step 0" in restart_choice(Path("/r/x.fix.toml"), item, env, finished=True).question


def test_fix_of_a_run_started_with_model_path_validates(tmp_path: Path) -> None:
    import msgspec

    run, _ = _fake_run(tmp_path)
    run.recipe.write_text(run.recipe.read_text().replace('path = "Qwen/Qwen2.5-7B-Instruct"', 'path = ""'))
    settings = msgspec.structs.replace(run.read_settings(), model_path="/models/qwen")
    run.settings.write_bytes(msgspec.json.encode(settings))
    rundir.seal(run)  # as `loratui run --model-path` would have made it
    assert run.load_recipe()[0].model.path == "/models/qwen"  # type: ignore[union-attr]
    path, _ = write_fixed_recipe(run, "vram_near_limit", {"training.per_device_train_batch_size": 2})
    assert load_recipe(path, model_path="/models/qwen").training.per_device_train_batch_size == 2


@pytest.mark.slow
def test_restart_of_a_finished_run_trains_a_fresh_run_to_max_steps(tmp_path: Path, runs_dir: Path) -> None:
    """Resuming a finished run's last checkpoint trained `step 81/80`; a fresh run stops at max_steps."""
    recipe = tmp_path / "tiny.toml"
    recipe.write_text(TINY.read_text().replace('path = "data/', f'path = "{REPO}/recipes/data/')
                      .replace("save_steps = 60", "save_steps = 2"))
    from tests.conftest import loratui

    done = loratui("run", str(recipe), "--headless", "--max-steps", "4", "--runs-dir", str(runs_dir), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    run = rundir.RunDir(only_run(runs_dir))
    fixed, env = write_fixed_recipe(run, "loss_diverging", {"training.learning_rate": 1e-3})
    new = restart_with(run, fixed, env, lambda command: None)
    end = wait_for(lambda: kinds(new.path, "end"), timeout=300)
    assert end[0]["state"] == "finished"  # type: ignore[index]
    assert kinds(new.path, "train_begin")[0].get("start_step", 0) == 0 and new.read_settings().resume_from is None
    assert max(int(e["step"]) for e in kinds(new.path, "step")) == 4  # type: ignore[arg-type]


def test_a_fix_of_a_builtin_recipes_run_never_lands_inside_the_package(tmp_path: Path) -> None:
    from loratui.recipe import BUILTIN_DIR

    runs = tmp_path / "runs"
    source = BUILTIN_DIR / "tiny.toml"
    settings = rundir.RunSettings(run_id="r", name="tiny", recipe_source=str(source), recipe_dir=str(BUILTIN_DIR))
    run = rundir.create(runs, settings, source.read_text())
    path, _ = write_fixed_recipe(run, "loss_flat", {"training.learning_rate": 1e-4})
    assert path.parent == run.path and not list(BUILTIN_DIR.glob("*.fix-*"))
    assert Path(load_recipe(path).data.path).is_file()  # its data path still resolves from the run dir
