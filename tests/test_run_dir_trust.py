"""Issue 25 items 1-3: a run directory is data. A run this user's loratui did not make (copied, unpacked,
another user's) never has its run.json environment, command or recipe run by `resume` or `A`/`y`; the `A`
prompt shows the exact command line `y` would run; nothing is written through a link or into what another
user owns, whichever command writes."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import msgspec
import pytest

from loratui import cli, events, rundir
from loratui.errors import ApplyError
from loratui.eventlog import EventWriter
from loratui.recipe import load_recipe
from loratui.sources.runlog import ListSource
from loratui.supervisor import launch
from loratui.supervisor.restart import restart_with, write_fix
from loratui.tui.app import LoratuiApp, RunActions
from tests.conftest import REPO, TINY
from tests.test_app import _settle
from tests.test_config_fix import LLAMAFACTORY_YAML, _watched_events, _watched_run

BASHRC = "# the user's own file\n"


def _evil_pythonpath(tmp_path: Path) -> tuple[Path, Path]:
    """A folder with a sitecustomize.py that leaves a marker when any Python starts with it on PYTHONPATH."""
    evil = tmp_path / "evil"
    evil.mkdir()
    marker = tmp_path / "PWNED"
    (evil / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    return evil, marker


def _suspended(run: rundir.RunDir) -> None:
    log = EventWriter(run.events)
    log.write(events.Header(t=1.0, schema=1, run_id=run.path.name, recipe_hash="h", name=run.path.name))
    log.write(events.State(t=2.0, state=events.SUSPENDED, reason="checkpoint written, GPU freed"))
    log.close()


def _unpacked_run(runs: Path, env: dict[str, str]) -> rundir.RunDir:
    """A suspended run as a tarball from elsewhere unpacks it: files the user owns, no seal of theirs."""
    run = rundir.RunDir(runs / "20260101-000000-tiny")
    (run.path / "checkpoints").mkdir(parents=True)
    run.recipe.write_text(TINY.read_text())
    settings = rundir.RunSettings(run_id=run.path.name, name="tiny", recipe_source=str(TINY), env=env)
    run.settings.write_bytes(msgspec.json.encode(settings))
    _suspended(run)
    return run


def _sealed_suspended_run(runs: Path) -> rundir.RunDir:
    settings = rundir.RunSettings(run_id="20260101-000000-mine", name="mine", recipe_source=str(TINY))
    run = rundir.create(runs, settings, TINY.read_text())
    _suspended(run)
    return run


def _refused_resume(run: rundir.RunDir, capsys: pytest.CaptureFixture[str]) -> str:
    assert cli.main(["resume", str(run.path)]) == 2
    assert not run.supervisor_log.exists() and not run.pidfile.exists()  # no supervisor was started
    return capsys.readouterr().err


def test_resume_of_an_unpacked_run_runs_nothing_of_its_run_json(tmp_path: Path, runs_dir: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    evil, marker = _evil_pythonpath(tmp_path)
    run = _unpacked_run(runs_dir, {"PYTHONPATH": str(evil), "LD_PRELOAD": str(evil / "x.so")})
    err = _refused_resume(run, capsys)
    assert "was not started by your loratui" in err and "loratui run" in err and "Traceback" not in err
    assert not marker.exists()


def test_a_sealed_run_whose_run_json_was_edited_is_not_resumed(tmp_path: Path, runs_dir: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    evil, marker = _evil_pythonpath(tmp_path)
    run = _sealed_suspended_run(runs_dir)
    assert run.sealed()
    settings = msgspec.structs.replace(run.read_settings(), env={"PYTHONPATH": str(evil)})
    run.settings.write_bytes(msgspec.json.encode(settings))
    assert not run.sealed()
    assert "was not started by your loratui" in _refused_resume(run, capsys) and not marker.exists()


def test_a_recipe_changed_after_the_seal_breaks_it(tmp_path: Path) -> None:
    """A recipe run's trainer loads the copy (trust_remote_code, the model path): it is sealed too."""
    run = _sealed_suspended_run(tmp_path / "runs")
    run.recipe.write_text(run.recipe.read_text() + "\n# trust_remote_code would go here\n")
    assert not run.sealed()


def test_a_seal_made_with_another_users_key_is_not_this_users(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "colleague-state"))
    run = _sealed_suspended_run(tmp_path / "runs")  # sealed by the colleague's loratui
    assert run.sealed()
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "my-state"))
    assert not run.sealed()


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_root_does_not_resume_a_run_dir_owned_by_nobody(runs_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _sealed_suspended_run(runs_dir)
    for path in [run.path, *run.path.rglob("*")]:
        os.chown(path, 65534, 65534, follow_symlinks=False)
    err = _refused_resume(run, capsys)
    assert "belongs to another user (uid 65534)" in err


# -- item 2: A, y ---------------------------------------------------------------------------------------------

COMMAND = ["llamafactory-cli", "train", "examples/qwen_lora.yaml"]


def test_A_on_a_copied_watched_run_neither_writes_nor_reruns_its_command(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    run, config = _watched_run(tmp_path, COMMAND + ["--evil"], LLAMAFACTORY_YAML)
    run.seal_file.write_text("0" * 64)  # a colleague's seal (or none): not this user's
    started: list[object] = []
    monkeypatch.setattr(launch, "start_command", lambda *a, **k: started.append(a))
    with pytest.raises(ApplyError, match="not started by your loratui"):
        write_fix(run, "vram_near_limit", {"per_device_train_batch_size": 2})
    with pytest.raises(ApplyError, match="not started by your loratui"):
        restart_with(run, config, {}, lambda command: None, wait_s=0)
    assert started == [] and not list(config.parent.glob("*loratui-fix*"))


async def test_the_A_prompt_shows_the_command_line_y_would_run(tmp_path: Path) -> None:
    """The command comes from run.json (what `y` runs), not from the log's header (which may say anything)."""
    from loratui.supervisor.restart import restart_command_line

    stored = COMMAND + ["--extra", "from run.json"]
    run, config = _watched_run(tmp_path, stored, LLAMAFACTORY_YAML)
    actions = RunActions(send=lambda command: None, write_fix=lambda advice_id, fix: write_fix(run, advice_id, fix),
                         restart=lambda recipe, env, send: restart_with(run, recipe, env, send),
                         command_for=lambda fixed: restart_command_line(run, fixed))
    live = load_recipe(REPO / "recipes" / "qwen7b.toml")
    app = LoratuiApp(ListSource(_watched_events(COMMAND)), live, actions=actions)  # the header: no --extra
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(pilot, app, 60)
        await pilot.pause(1.2)
        await pilot.press("a", "A")
        await pilot.pause(0.3)
        question = app.screen.question  # type: ignore[attr-defined]
        await pilot.press("n")
        await pilot.pause(0.2)
    (written,) = config.parent.glob("qwen_lora.loratui-fix*.yaml")
    expected = shlex.join(["llamafactory-cli", "train", f"examples/{written.name}", "--extra", "from run.json"])
    assert "Command that will run (from the run's run.json):" in question and expected in question


# -- item 3: links ----------------------------------------------------------------------------------------------


def test_stop_never_appends_through_a_linked_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bashrc = tmp_path / "bashrc"
    bashrc.write_text(BASHRC)
    run = _sealed_suspended_run(tmp_path / "runs")  # `stop` of a suspended run starts no process
    real = run.path / "events.real.jsonl"
    run.events.rename(real)
    run.events.symlink_to(bashrc)
    bashrc.write_text(BASHRC + real.read_text())  # so the link still reads as a suspended run's log
    before = bashrc.read_text()
    assert cli.main(["stop", str(run.path)]) == 2
    err = capsys.readouterr().err
    assert "events.jsonl is a symbolic link" in err and "never writes through a link" in err
    assert bashrc.read_text() == before


def test_resume_never_writes_through_a_linked_checkpoint(tmp_path: Path, runs_dir: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    victim = tmp_path / "other-project" / "checkpoint"
    victim.mkdir(parents=True)
    (victim / "adapter_model.safetensors").write_bytes(b"precious")
    run = _sealed_suspended_run(runs_dir)
    (run.checkpoints / "checkpoint-30").symlink_to(victim, target_is_directory=True)
    err = _refused_resume(run, capsys)
    assert "checkpoint-30 is a symbolic link" in err
    assert [p.name for p in victim.iterdir()] == ["adapter_model.safetensors"]


def test_a_linked_file_deeper_in_a_checkpoint_is_found_too(tmp_path: Path) -> None:
    from loratui import safeio

    run = _sealed_suspended_run(tmp_path / "runs")
    (run.checkpoints / "checkpoint-20").mkdir()
    (run.checkpoints / "checkpoint-20" / "optimizer.pt").symlink_to(tmp_path / "elsewhere")
    assert "checkpoint-20/optimizer.pt is a symbolic link" in safeio.problem(run.path)
    assert safeio.problem(_sealed_suspended_run(tmp_path / "other").path) == ""


@pytest.mark.parametrize("writer", ["event log", "append", "pidfile"])
def test_no_writer_follows_a_link_at_its_name(tmp_path: Path, writer: str) -> None:
    from loratui import safeio

    bashrc = tmp_path / "bashrc"
    bashrc.write_text(BASHRC)
    link = tmp_path / "run" / "file"
    link.parent.mkdir()
    link.symlink_to(bashrc)
    if writer == "pidfile":
        rundir.write_pidfile(link)  # replaced: the link itself gives way to a new file
        assert not link.is_symlink() and link.read_text().split()[0] == str(os.getpid())
    else:
        with pytest.raises(OSError):
            if writer == "event log":
                EventWriter(link)
            else:
                safeio.append_file(link)
    assert bashrc.read_text() == BASHRC


def test_a_fifo_planted_at_an_output_name_is_refused_not_hung_on(tmp_path: Path) -> None:
    from loratui import safeio

    fifo = tmp_path / "trainer.stdout.log"
    os.mkfifo(fifo)
    with pytest.raises(OSError):  # ENXIO: no reader (an open that blocked would hang here)
        safeio.append_file(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(OSError, match="not a regular file"):
            safeio.append_file(fifo)
    finally:
        os.close(reader)


def test_the_supervisor_log_is_private(tmp_path: Path) -> None:
    """It may hold a crash's traceback: owner-only, like every file loratui appends to in a run."""
    from loratui import safeio

    with safeio.append_file(tmp_path / "supervisor.log") as handle:
        handle.write(b"x")
    assert (tmp_path / "supervisor.log").stat().st_mode & 0o077 == 0


def test_run_directories_stay_writable_for_their_own_runs(tmp_path: Path) -> None:
    """A run loratui made passes every check (the tests of sys.executable's runs depend on it)."""
    run = _sealed_suspended_run(tmp_path / "runs")
    launch.check_adoptable(run)
    assert sys.executable  # the supervisor it would start is this Python


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_replay_writes_no_index_into_another_users_run_directory(tmp_path: Path) -> None:
    """Root can write anywhere: that is no reason to leave a file in `nobody`'s folder."""
    from loratui.sources.logindex import IndexedLog, idx_path
    from tests import scenarios

    theirs = tmp_path / "theirs"
    theirs.mkdir()
    path = theirs / "events.jsonl"
    path.write_bytes(b"".join(events.encode(e) for e in scenarios.run(5)))
    os.chown(theirs, 65534, 65534)
    IndexedLog.of_file(path).update()
    assert not idx_path(path).exists() and sorted(p.name for p in theirs.iterdir()) == ["events.jsonl"]


def test_resume_of_a_run_with_a_fifo_for_its_recipe_is_refused_not_hung(runs_dir: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    run = _sealed_suspended_run(runs_dir)
    run.recipe.unlink()
    os.mkfifo(run.recipe)
    assert "recipe.toml is a FIFO or a device" in _refused_resume(run, capsys)


def test_commands_are_read_a_whole_line_at_a_time(tmp_path: Path) -> None:
    """The one reader of control.cmds (trainer and keeper): a line still being written waits for its newline,
    and what was read is not read again."""
    from loratui.rundir import CommandTail

    path = tmp_path / "control.cmds"
    tail = CommandTail(path)
    assert tail.new() == []  # no file yet
    path.write_bytes(b"pause\nres")
    assert tail.new() == ["pause"]
    with open(path, "ab") as handle:
        handle.write(b"ume\n\nstop\n")
    assert tail.new() == ["resume", "stop"] and tail.new() == []
