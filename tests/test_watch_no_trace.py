"""A watched script sees the process it would see alone (issue 24 item 2; issue 25 items 12 and 13).

tests/data/scripts/no_trace_probe.py reports its own view (during training and after it) of each thing a
monitor could change. It runs once alone and once under `loratui run --` (sent `save` at step 2, with a
`sitecustomize` of the user's own on its path), and the two reports must be equal, but for what the README
documents: SIGHUP ignored (as nohup does), and the hook's variables in the environment (LORATUI_*, and the
hook's directory first on PYTHONPATH, so that the command's own child processes are watched too).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loratui.supervisor import control
from loratui.supervisor.command import HOOK_DIR
from tests.conftest import REPO, kinds, loratui, only_run, wait_for
from tests.test_watch_runs import ENV, _run, _steps, model_dir, watch_dir  # noqa: F401 - fixtures

pytestmark = pytest.mark.slow
PROBE = REPO / "tests" / "data" / "scripts" / "no_trace_probe.py"
USER_SITECUSTOMIZE = '''import os, sys
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "extra"))
if os.environ.get("PROBE_SITE_LOG"):  # each process it runs in: the user's, never loratui's keeper
    with open(os.environ["PROBE_SITE_LOG"], "a") as log:
        log.write(open("/proc/self/cmdline", "rb").read().replace(b"\\0", b" ").decode() + "\\n")
'''


def _user_env(base: Path) -> dict[str, str]:
    """The user's environment: a sitecustomize of their own that adds a directory to sys.path."""
    site = base / "usersite"
    (site / "extra").mkdir(parents=True)
    (site / "sitecustomize.py").write_text(USER_SITECUSTOMIZE)
    (site / "extra" / "user_extra_mod.py").write_text("VALUE = 'from the user path'\n")
    path = os.pathsep.join(p for p in (str(site), ENV.get("PYTHONPATH", "")) if p)
    env = {k: v for k, v in ENV.items() if k not in ("NCCL_NVLS_ENABLE", "TQDM_DISABLE", "PYTHONUNBUFFERED")}
    return dict(env, PYTHONPATH=path, PROBE_USER_MODULE="user_extra_mod", PROBE_SITE_LOG=str(base / "site.log"))


@pytest.fixture(scope="module")
def reports(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # noqa: F811
    """The probe's report alone and watched, and the watched run's directory."""
    base = tmp_path_factory.mktemp("probe")
    env = _user_env(base)
    work = base / "work"
    work.mkdir()
    command = [sys.executable, str(PROBE), "--model", str(model_dir), "--out", "out", "--save-total-limit", "1",
               "--gate", str(base / "gate")]
    (base / "gate").touch()
    alone = subprocess.run([*command, "--report", str(base / "alone.json")], cwd=work,
                           env=env, timeout=600,
                           capture_output=True, text=True)
    assert alone.returncode == 0, alone.stderr[-3000:]
    (base / "gate").unlink()
    site_alone = (base / "site.log").read_text().splitlines()
    (base / "site.log").unlink()
    shutil.rmtree(work / "out")
    runs = base / "runs"
    viewer = subprocess.Popen([sys.executable, "-m", "loratui", "run", "--headless", "--runs-dir", str(runs), "--",
                               *command, "--report", str(base / "watched.json")], cwd=work,
                              env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        run = _run(runs)
        wait_for(lambda: (_steps(run) and max(_steps(run)) >= 1) or kinds(run, "end"), timeout=600)
        assert not kinds(run, "end"), (run / "trainer.stderr.log").read_text()[-3000:]
        control.send(run / "control.sock", "save")  # obeyed at step 2's end, where the probe waits
        (base / "gate").touch()
        out, _ = viewer.communicate(timeout=600)
    finally:
        viewer.kill()
    assert viewer.returncode == 0, out[-3000:]
    return {"site_runs": [site_alone, (base / "site.log").read_text().splitlines()],
            "alone": json.loads((base / "alone.json").read_text()),
            "watched": json.loads((base / "watched.json").read_text()), "run": run}


def _both(reports: dict[str, Any], key: str) -> list[tuple[Any, Any]]:
    """(alone, watched) of `key`, during training and after it."""
    return [(reports["alone"][when][key], reports["watched"][when][key]) for when in ("during", "after")]


def test_memory_counters_and_rng_streams_are_the_scripts_own(reports: dict[str, Any]) -> None:
    for alone, watched in _both(reports, "memory") + _both(reports, "rng"):
        assert alone == watched
    assert reports["watched"]["during"]["memory"]["resets"] == 0


def test_peaks_of_a_watched_script_are_a_running_max_never_reset() -> None:
    """On the CPU the probe has no CUDA counters to watch: the callback a watched Trainer gets reads them
    from torch.cuda as given, here a recorder of what it is asked (bench/peak_no_trace.sh: the H200)."""
    from loratui.trainer.callback import ControlState, EventCallback, TokenCounter
    from loratui.trainer.watch import WATCHED_OPTIONS

    class Counters:
        def __init__(self) -> None:
            self.calls: list[str] = []
            self.peak = 0

        def __getattr__(self, name: str) -> Any:
            def read() -> int:
                self.calls.append(name)
                self.peak += 1 << 20
                return self.peak
            return read

    class Step:
        global_step, epoch = 1, 0.0

    def step_once(**options: Any) -> Counters:
        counters, emitted = Counters(), []
        callback = EventCallback(emitted.append, ControlState(), TokenCounter(), {}, counters, **options)
        callback.on_step_end(None, Step(), type("C", (), {"should_save": False})())
        assert emitted[0].peak_allocated is not None
        return counters

    assert "reset_peak_memory_stats" not in step_once(**WATCHED_OPTIONS).calls
    assert "reset_peak_memory_stats" in step_once().calls  # loratui's own trainer: a per-step peak


def test_logging_warnings_and_signal_handlers_are_the_scripts_own(reports: dict[str, Any]) -> None:
    for key in ("logging", "warnings", "faulthandler"):
        for alone, watched in _both(reports, key):
            assert alone == watched, key
    for alone, watched in _both(reports, "signals"):
        assert {k: v for k, v in alone.items() if k != "SIGHUP"} == {k: v for k, v in watched.items() if k != "SIGHUP"}
        assert watched["SIGHUP"] == "SIG_IGN"  # the one intended difference: a detached run survives


def test_path_sitecustomize_buffering_cwd_and_environment_are_the_scripts_own(reports: dict[str, Any]) -> None:
    alone, watched = reports["alone"], reports["watched"]
    assert alone["user_module"] == watched["user_module"] == "from the user path"  # theirs ran, path kept
    alone_runs, watched_runs = reports["site_runs"]
    probes = [r for r in watched_runs if r.split()[1:2] == [str(PROBE)]]  # the script itself, not `loratui run`
    assert len(alone_runs) == 1 and len(probes) == 1
    assert not [r for r in watched_runs if "keeper" in r]  # loratui's keeper of the command runs none of it
    for key in ("sys_path", "meta_path", "sitecustomize", "stdout", "stderr", "cwd"):
        for seen_alone, seen_watched in _both(reports, key):
            assert seen_alone == seen_watched, key
    for when in ("during", "after"):
        env_alone, env_watched = alone[when]["env"], dict(watched[when]["env"])
        hook_path = env_watched.pop("PYTHONPATH").split(os.pathsep)
        assert hook_path == [str(HOOK_DIR), *env_alone["PYTHONPATH"].split(os.pathsep)]
        added = {k for k in env_watched if k.startswith("LORATUI_") and k not in env_alone}
        assert added == {"LORATUI_RUN_DIR", "LORATUI_HOOK_ROOT", "LORATUI_SUPERVISOR_PID"}, added  # README's three
        assert {k: v for k, v in env_watched.items() if k not in added} == \
            {k: v for k, v in env_alone.items() if k != "PYTHONPATH"}
        for unwanted in ("NCCL_NVLS_ENABLE", "TQDM_DISABLE", "PYTHONUNBUFFERED"):
            assert unwanted not in env_watched


def test_descriptors_are_the_scripts_own_after_training(reports: dict[str, Any]) -> None:
    """The hook's callback kept the run's log open (fd 3) from train begin to the process's exit: the script's code
    after train() saw a descriptor of loratui's. Now only training holds it (each step is written to it)."""
    def fds(when: str, who: str) -> dict[str, str]:
        return {fd: target for fd, target in reports[who][when]["fds"].items() if target is not None}

    run = reports["run"]
    assert sorted(fds("after", "watched")) == sorted(fds("after", "alone")), fds("after", "watched")
    extra = set(fds("during", "watched")) - set(fds("during", "alone"))
    assert [fds("during", "watched")[fd] for fd in extra] == [str(run / "events.jsonl")]


def test_save_writes_only_what_the_trainer_writes(reports: dict[str, Any]) -> None:
    run = reports["run"]
    assert reports["watched"]["files"] == reports["alone"]["files"]  # no saved/ beside the checkpoints
    assert not any("saved" in name.split(os.sep) for name in reports["watched"]["files"])
    assert [e["step"] for e in kinds(run, "checkpoint")][:1] == [2]  # `s` was obeyed: the Trainer saved
    notes = [str(e["message"]) for e in kinds(run, "notice") if e.get("key") == "training.save_total_limit"]
    assert notes and "save_total_limit = 1 deletes it" in notes[0]


def test_the_hook_leaves_no_sitecustomize_module_when_the_user_has_none(tmp_path: Path) -> None:
    """Without a sitecustomize of the user's, the process ends with none in sys.modules, as alone; the hook's
    directory is off sys.path; the finder waiting for transformers.trainer is all that stays (until then)."""
    code = ("import json, sys; print(json.dumps([repr(sys.modules.get('sitecustomize')), sys.path, "
            "[type(f).__name__ for f in sys.meta_path]]))")
    env = {k: v for k, v in ENV.items() if k != "PYTHONPATH"}
    alone = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    hooked = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env=dict(env, PYTHONPATH=str(HOOK_DIR), LORATUI_RUN_DIR=str(tmp_path)))
    assert alone.returncode == hooked.returncode == 0, hooked.stderr
    assert hooked.stderr == alone.stderr == ""
    module, path, finders = json.loads(hooked.stdout)
    assert [module, path] == json.loads(alone.stdout)[:2] and module == "None"
    assert finders == ["PostImportFinder", *json.loads(alone.stdout)[2]]


def test_a_newline_in_an_argument_still_runs_the_command(watch_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    marker = tmp_path / "ran"
    script = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text(sys.argv[2])"
    result = loratui("run", "--headless", "--runs-dir", str(watch_dir), "--", sys.executable, "-c", script,
                     str(marker), "two\nlines", timeout=300, env=ENV)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert marker.read_text() == "two\nlines"
    assert kinds(only_run(watch_dir), "end")[0]["state"] == "finished"


def test_recipe_runs_keep_their_variables_and_a_user_nccl_setting_wins() -> None:
    """The variables a watched command no longer gets stay for loratui's own trainer (a recipe run)."""
    from loratui.supervisor.owner import recipe_trainer_env

    env = recipe_trainer_env({"PATH": "/bin"}, {})
    assert env == {"PATH": "/bin", "PYTHONUNBUFFERED": "1", "TQDM_DISABLE": "1", "NCCL_NVLS_ENABLE": "0"}
    assert recipe_trainer_env({"NCCL_NVLS_ENABLE": "1"}, {})["NCCL_NVLS_ENABLE"] == "1"


def test_the_vram_pane_calls_a_watched_runs_peak_a_running_max() -> None:
    from loratui.logic.runstate import RunState
    from loratui.tui.widgets.vram import _torch_line

    state = RunState()
    state.torch_allocated, state.torch_reserved = 1 << 30, 2 << 30
    state.step_peak_allocated, state.step_peak_reserved = 3 << 30, 4 << 30
    assert "step peak 3.0/4.0 GiB" in _torch_line(state)
    state.command = ["python", "train.py"]
    assert "peak so far 3.0/4.0 GiB" in _torch_line(state)


PLAIN_PROBE = REPO / "tests" / "data" / "scripts" / "plain_probe.py"


def _reports_alone_and_watched(command: list[str], cwd: Path, runs: Path, extra: int) -> tuple[Any, Any]:
    """The probe's report of `command` run alone, then under `loratui run --`, each given descriptor `extra`."""
    reports = []
    for prefix in ([], [sys.executable, "-m", "loratui", "run", "--headless", "--runs-dir", str(runs), "--"]):
        done = subprocess.run([*prefix, *command], cwd=cwd, env=ENV, stdin=subprocess.DEVNULL, pass_fds=(extra,),
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        reports.append(json.loads((cwd / "report.json").read_text()))
        (cwd / "report.json").unlink()
    return reports[0], reports[1]


def test_a_watched_plain_script_sees_no_loratui_module_and_the_process_it_sees_alone(watch_dir: Path,  # noqa: F811
                                                                                    tmp_path: Path) -> None:
    """`loratui run -- python s.py` of a script with no Trainer: `loratui.trainer.autohook` (and loratui,
    loratui.trainer, importlib.abc's and typing's modules) were in its sys.modules. Compared with the same script
    alone: its modules, argv, __main__, cwd, sys.path, environment, descriptors, umask, flags and signal handlers.
    What stays is documented (README, watch your own script): SIGHUP ignored, the LORATUI_* variables and the
    hook's directory on PYTHONPATH, the finder that waits for transformers.trainer, stdout/stderr to the run's
    logs and a process group of its own. A descriptor beyond 0-2 that it inherits (a shell's `7>file`) reaches it
    as it does alone: loratui's launcher, supervisor and keeper used to close it."""
    command = [sys.executable, str(PLAIN_PROBE), "report.json"]
    reader, extra = os.pipe()
    try:
        seen_alone, seen = _reports_alone_and_watched(command, tmp_path, watch_dir, extra)
    finally:
        os.close(reader)
        os.close(extra)
    assert seen["loratui_modules"] == seen_alone["loratui_modules"] == []
    assert sorted(set(seen["modules"]) ^ set(seen_alone["modules"])) == []
    for key in ("argv", "main_file", "cwd", "sys_path", "path_hooks", "umask", "flags", "sitecustomize"):
        assert seen[key] == seen_alone[key], key
    assert seen["meta_path"] == ["PostImportFinder", *seen_alone["meta_path"]]
    assert {k: v for k, v in seen["signals"].items() if k != "SIGHUP"} == \
        {k: v for k, v in seen_alone["signals"].items() if k != "SIGHUP"}
    assert sorted(seen["fds"]) == sorted(seen_alone["fds"]) and seen["fds"]["0"] == seen_alone["fds"]["0"]
    assert str(extra) in seen["fds"] and seen["fds"][str(extra)] == seen_alone["fds"][str(extra)]
    ours = {"LORATUI_RUN_DIR", "LORATUI_HOOK_ROOT", "LORATUI_SUPERVISOR_PID", "LORATUI_CMDS_OFFSET", "PYTHONPATH"}
    env = {k: v for k, v in seen["env"].items() if k not in ours}  # a LORATUI_* of the user's passes as it is
    assert env == {k: v for k, v in seen_alone["env"].items() if k != "PYTHONPATH"}
    alone_path = [p for p in seen_alone["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    assert seen["env"]["PYTHONPATH"].split(os.pathsep) == [str(HOOK_DIR), *alone_path]


RANDOM_CROP = REPO / "tests" / "data" / "scripts" / "random_crop.py"


def _printed_losses(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("{'loss'")]


def test_a_dataset_that_draws_random_numbers_trains_on_the_same_numbers_watched(model_dir: Path,  # noqa: F811
                                                                                  watch_dir: Path,  # noqa: F811
                                                                                  tmp_path: Path) -> None:
    """The estimate at train begin measures the dataset's examples, and a torch Dataset's __getitem__ may draw
    random numbers (a random crop): those draws moved torch's generator, so the sampler's shuffle and the
    crops of the watched run were not the script's (its printed losses differed from the run alone)."""
    command = [sys.executable, str(RANDOM_CROP), str(model_dir), str(tmp_path / "out")]
    alone = subprocess.run(command, cwd=tmp_path, env=ENV, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=300, check=False)
    assert alone.returncode == 0, alone.stderr[-2000:]
    watched = subprocess.run([sys.executable, "-m", "loratui", "run", "--headless", "--runs-dir", str(watch_dir),
                              "--", *command], cwd=tmp_path, env=ENV, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=300, check=False)
    assert watched.returncode == 0, watched.stdout[-2000:] + watched.stderr[-2000:]
    run = only_run(watch_dir)
    assert kinds(run, "train_begin") and kinds(run, "estimate")  # hooked, and the dataset was measured
    losses = _printed_losses((run / "trainer.stdout.log").read_text())
    assert len(losses) == 3 and losses == _printed_losses(alone.stdout)


SPAWN_WORKERS = REPO / "tests" / "data" / "scripts" / "spawn_workers.py"


def test_spawned_dataloader_workers_load_no_loratui_module(model_dir: Path, watch_dir: Path,  # noqa: F811
                                                           tmp_path: Path) -> None:
    """A "spawn" DataLoader worker re-imports the script, so transformers.trainer, and builds no Trainer: the
    hook loaded loratui's modules into each worker all the same (loratui, loratui.trainer.watch, events...)."""
    reports = tmp_path / "reports"
    reports.mkdir()
    command = [sys.executable, str(SPAWN_WORKERS), str(model_dir), str(tmp_path / "out"), str(reports)]
    watched = subprocess.run([sys.executable, "-m", "loratui", "run", "--headless", "--runs-dir", str(watch_dir),
                              "--", *command], cwd=tmp_path, env=ENV, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=600, check=False)
    assert watched.returncode == 0, watched.stdout[-2000:] + watched.stderr[-2000:]
    run = only_run(watch_dir)
    assert kinds(run, "train_begin") and len(_steps(run)) == 2  # the script's own Trainer is hooked
    seen = {path.name: json.loads(path.read_text()) for path in reports.glob("worker-*.json")}
    assert len(seen) == 2 and all(modules == [] for modules in seen.values()), seen


def test_an_inherited_descriptor_is_the_scripts_alone(watch_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    """`loratui run -- python s.py 7>pipe`: the script writes to fd 7 and closes it, and the pipe's reader sees its
    end then, while the run still goes on: no loratui process (launcher, supervisor, keeper) keeps a copy."""
    marker = tmp_path / "go on"
    script = ("import os, sys, time, pathlib; fd = int(sys.argv[1]); os.write(fd, b'from the script'); os.close(fd)\n"
              "deadline = time.monotonic() + 300\n"
              "while not pathlib.Path(sys.argv[2]).exists() and time.monotonic() < deadline: time.sleep(0.05)")
    reader, extra = os.pipe()
    launcher = subprocess.Popen([sys.executable, "-m", "loratui", "run", "--headless", "--runs-dir", str(watch_dir),
                                 "--", sys.executable, "-c", script, str(extra), str(marker)], cwd=REPO, env=ENV,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                pass_fds=(extra,))
    os.close(extra)
    try:
        got = b""
        while chunk := _read_within(reader, 300):
            got += chunk
        assert got == b"from the script"
        assert launcher.poll() is None  # the script waits for the marker: its run still goes on
    finally:
        os.close(reader)
        marker.touch()
        out = launcher.communicate(timeout=300)[0].decode(errors="replace")
    assert launcher.returncode == 0, out[-2000:]
    assert kinds(only_run(watch_dir), "end")[0]["state"] == "finished"


def _read_within(fd: int, seconds: float) -> bytes:
    """What `fd` gives next (b"" at its end); fails when nothing comes within `seconds`."""
    import select

    ready, _, _ = select.select([fd], [], [], seconds)
    assert ready, f"no end of the pipe within {seconds} s: a process other than the script holds its writing end"
    return os.read(fd, 4096)
