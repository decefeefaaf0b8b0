"""Real runs on the CPU: a tiny model through the real CLI, supervisor and trainer subprocesses."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loratui.supervisor import control
from tests.conftest import REPO, TINY, kinds, loratui, only_run, read_events, wait_for

pytestmark = pytest.mark.slow


def _losses(run: Path) -> list[float]:
    return [float(e["values"]["loss"]) for e in kinds(run, "log")  # type: ignore[index]
            if "loss" in e["values"] and "train_runtime" not in e["values"]]  # type: ignore[operator]


def test_tiny_run_completes_and_records_everything(runs_dir: Path) -> None:
    result = loratui("run", str(TINY), "--headless", "--max-steps", "40", "--runs-dir", str(runs_dir))
    assert result.returncode == 0, result.stdout + result.stderr
    run = only_run(runs_dir)
    found = read_events(run)
    assert found[0]["kind"] == "header" and found[0]["schema"] == 1 and found[0]["recipe_hash"]
    steps = [e["step"] for e in kinds(run, "step")]
    assert steps == list(range(1, 41))
    phases = {(e["name"], e["edge"]) for e in kinds(run, "phase")}
    assert {("train", "begin"), ("train", "end"), ("save", "begin"), ("save", "end")} <= phases or \
        {("train", "begin"), ("train", "end")} <= phases
    assert kinds(run, "gpu_info") and (kinds(run, "sample") or kinds(run, "gpu_info")[0]["available"] is False)
    assert found[-1]["kind"] == "end" and found[-1]["state"] == "finished"
    losses = _losses(run)
    assert len(losses) == 40
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < first * 0.75, (first, last)
    assert "finished at step 40" in result.stdout
    assert os.stat(run).st_mode & 0o777 == 0o700


def test_qlora_4bit_path_runs_on_cpu(runs_dir: Path, tmp_path: Path) -> None:
    recipe = tmp_path / "qlora.toml"
    recipe.write_text(TINY.read_text().replace("[lora]", "[quantization]\nload_in_4bit = true\n"
                                               'bnb_4bit_quant_type = "nf4"\nbnb_4bit_use_double_quant = true\n'
                                               'bnb_4bit_compute_dtype = "float32"\n\n[lora]')
                      .replace('path = "data/', f'path = "{REPO}/recipes/data/'))
    result = loratui("run", str(recipe), "--headless", "--max-steps", "3", "--runs-dir", str(runs_dir))
    assert result.returncode == 0, result.stdout + result.stderr
    run = only_run(runs_dir)
    assert len(kinds(run, "step")) == 3 and all(math.isfinite(x) for x in _losses(run))
    assert "Linear4bit" in _module_kinds_printed(run) or kinds(run, "end")[0]["state"] == "finished"


def _module_kinds_printed(run: Path) -> str:
    return (run / "trainer.stdout.log").read_text() + (run / "trainer.stderr.log").read_text()


def _start_detached(runs_dir: Path, *extra: str) -> subprocess.Popen[str]:
    """`loratui run --headless` as a terminal would start it: its own session, like an SSH login."""
    return _start_detached_recipe(TINY, runs_dir, *extra)


def _start_detached_recipe(recipe: Path, runs_dir: Path, *extra: str) -> subprocess.Popen[str]:
    """The same, for any recipe."""
    return subprocess.Popen([sys.executable, "-m", "loratui", "run", str(recipe), "--headless",
                             "--runs-dir", str(runs_dir), *extra], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def start_and_reach(runs_dir: Path, max_steps: int, step: int,
                    extra: tuple[str, ...] = ()) -> tuple[subprocess.Popen[str], Path]:
    """A detached tiny run of `max_steps`, once it has taken `step` steps: (its viewer, its run dir)."""
    viewer = _start_detached(runs_dir, "--max-steps", str(max_steps), *extra)
    run = wait_for(lambda: runs_dir.exists() and any(runs_dir.iterdir()) and only_run(runs_dir))
    assert isinstance(run, Path)
    _wait_step(run, step)
    return viewer, run


def _trainer_pid(run: Path) -> int:
    begin = wait_for(lambda: kinds(run, "train_begin"), timeout=120)
    return int(begin[0]["pid"])  # type: ignore[index]


def _wait_step(run: Path, step: int) -> None:
    wait_for(lambda: any(e["step"] >= step for e in kinds(run, "step")), timeout=120)  # type: ignore[operator]


def test_kill_9_of_the_trainer_leaves_a_readable_log(runs_dir: Path) -> None:
    viewer = _start_detached(runs_dir, "--max-steps", "5000")
    run = wait_for(lambda: runs_dir.exists() and any(runs_dir.iterdir()) and only_run(runs_dir))
    pid = _trainer_pid(run)  # type: ignore[arg-type]
    _wait_step(run, 3)  # type: ignore[arg-type]
    os.kill(pid, signal.SIGKILL)
    out, _ = viewer.communicate(timeout=300)
    assert viewer.returncode == 1
    end = kinds(run, "end")  # type: ignore[arg-type]
    assert end and end[0]["state"] == "failed" and end[0]["signal"] == "SIGKILL"
    assert "killed by SIGKILL" in end[0]["error"]  # type: ignore[operator]
    assert "failed" in out


def test_supervisor_outlives_its_terminal_and_obeys_control(runs_dir: Path) -> None:
    viewer = _start_detached(runs_dir, "--max-steps", "5000")
    run = wait_for(lambda: runs_dir.exists() and any(runs_dir.iterdir()) and only_run(runs_dir))
    _wait_step(run, 2)  # type: ignore[arg-type]
    os.killpg(viewer.pid, signal.SIGHUP)  # the SSH link drops: the terminal's session is hung up
    os.killpg(viewer.pid, signal.SIGKILL)
    viewer.wait(timeout=120)
    sock = run / "control.sock"  # type: ignore[operator]
    assert oct(os.stat(sock).st_mode & 0o777) == "0o600"
    before = len(kinds(run, "step"))  # type: ignore[arg-type]
    _wait_step(run, before + 3)  # type: ignore[arg-type]  # training goes on with no viewer

    control.send(sock, "pause")
    wait_for(lambda: kinds(run, "state")[-1]["state"] == "paused")  # type: ignore[arg-type]
    held = len(kinds(run, "step"))  # type: ignore[arg-type]
    time.sleep(1.5)
    assert len(kinds(run, "step")) == held  # type: ignore[arg-type]
    control.send(sock, "resume")
    _wait_step(run, held + 2)  # type: ignore[arg-type]

    result = loratui("stop", str(run), "--runs-dir", str(runs_dir))
    assert result.returncode == 0, result.stderr
    wait_for(lambda: kinds(run, "end"), timeout=60)  # type: ignore[arg-type]
    assert kinds(run, "end")[0]["state"] == "stopped"  # type: ignore[arg-type]
    commands = [e["command"] for e in kinds(run, "control")]  # type: ignore[arg-type]
    assert commands == ["pause", "resume", "stop"]
    # The end event is written before the supervisor's last tidying (sampler, server, socket, status).
    wait_for(lambda: not sock.exists(), timeout=30)
    listing = loratui("ls", "--runs-dir", str(runs_dir))
    assert "stopped" in listing.stdout


def test_control_of_a_finished_run_is_refused(runs_dir: Path) -> None:
    assert loratui("run", str(TINY), "--headless", "--max-steps", "2", "--runs-dir", str(runs_dir)).returncode == 0
    result = loratui("pause", "--runs-dir", str(runs_dir))
    assert result.returncode == 2 and "no run is running" in result.stderr  # no RUN: never the newest
    named = loratui("pause", only_run(runs_dir).name, "--runs-dir", str(runs_dir))
    assert named.returncode == 2 and "is not running (finished)" in named.stderr


def _loss_by_step(run: Path) -> dict[int, float]:
    found: dict[int, float] = {}
    for e in kinds(run, "log"):
        values = e["values"]
        if "loss" in values and "train_runtime" not in values:  # type: ignore[operator]
            found[int(e["step"])] = float(values["loss"])  # type: ignore[index,arg-type]
    return found


def tokens_by_step(run: Path) -> dict[int, int]:
    """Rank 0's tokens seen at each step."""
    return {int(e["step"]): int(e.get("tokens_seen", 0)) for e in kinds(run, "step")  # type: ignore[arg-type]
            if not e.get("rank")}


def test_suspend_and_resume_continue_the_same_loss_curve(tmp_path: Path) -> None:
    """P (suspend: checkpoint, end the trainer) then r (resume from that checkpoint) in the same run:
    the losses after the resume match an uninterrupted run step for step."""
    straight, paused = tmp_path / "straight", tmp_path / "suspended"
    assert loratui("run", str(TINY), "--headless", "--max-steps", "30", "--runs-dir", str(straight)).returncode == 0
    viewer = _start_detached(paused, "--max-steps", "30")
    run = wait_for(lambda: paused.exists() and any(paused.iterdir()) and only_run(paused))
    _wait_step(run, 8)  # type: ignore[arg-type]
    control.send(run / "control.sock", "suspend")  # type: ignore[operator]
    wait_for(lambda: any(e["state"] == "suspended" for e in kinds(run, "state")), timeout=60)  # type: ignore[arg-type]
    # Recorded, so replay shows it too, where `r` does nothing: the way on that works everywhere (a tmux trial).
    wait_for(lambda: [e for e in kinds(run, "state") if e["state"] == "suspended" and e.get("reason")],  # type: ignore[arg-type]
             timeout=60)  # the supervisor's, after the trainer's own
    reason = [e["reason"] for e in kinds(run, "state") if e["state"] == "suspended" and e.get("reason")][-1]  # type: ignore[arg-type]
    assert reason.startswith("checkpoint written, ") and reason.endswith(" freed; `loratui resume` continues"), reason
    trainer_pid = int(kinds(run, "train_begin")[0]["pid"])  # type: ignore[arg-type,index]
    wait_for(lambda: not Path(f"/proc/{trainer_pid}").exists(), timeout=30)  # the GPU (here: CPU) is free
    control.send(run / "control.sock", "resume")  # type: ignore[operator]
    viewer.communicate(timeout=240)
    assert kinds(run, "end")[0]["state"] == "finished"  # type: ignore[arg-type]
    assert len(kinds(run, "train_begin")) == 2  # type: ignore[arg-type]
    a, b = _loss_by_step(only_run(straight)), _loss_by_step(run)  # type: ignore[arg-type]
    assert sorted(b) == list(range(1, 31))
    for step in range(1, 31):
        assert b[step] == pytest.approx(a[step], rel=1e-3), step
    # The run's tokens go on counting across the trainer's lives (the second began again at 0).
    assert tokens_by_step(run) == tokens_by_step(only_run(straight))  # type: ignore[arg-type]


def test_dataloader_workers_do_not_hang_the_trainer(tmp_path: Path, runs_dir: Path) -> None:
    """Forked DataLoader workers once hung on a stdin-reading thread of the trainer (now a command file)."""
    recipe = tmp_path / "workers.toml"
    recipe.write_text(TINY.read_text().replace('path = "data/', f'path = "{REPO}/recipes/data/')
                      .replace("[data]", "dataloader_num_workers = 2\n\n[data]"))
    result = loratui("run", str(recipe), "--headless", "--max-steps", "4", "--runs-dir", str(runs_dir), timeout=180)
    assert result.returncode == 0, result.stdout[-1500:] + result.stderr[-1500:]
    assert len(kinds(only_run(runs_dir), "step")) == 4


def test_stop_while_loading_ends_at_once(runs_dir: Path) -> None:
    """x (or `loratui stop`) before the first step: nothing to save, so the trainer ends now, not after a
    step that may be minutes away (a 32B model loads for minutes)."""
    viewer = _start_detached(runs_dir, "--max-steps", "3000")
    run = wait_for(lambda: runs_dir.exists() and any(runs_dir.iterdir()) and only_run(runs_dir))
    wait_for(lambda: any(e["state"] == "loading" for e in kinds(run, "state")), timeout=60)  # type: ignore[arg-type]
    started = time.monotonic()
    control.send(run / "control.sock", "stop")  # type: ignore[operator]
    viewer.communicate(timeout=300)
    assert time.monotonic() - started < 15
    assert kinds(run, "end")[0]["state"] == "stopped"  # type: ignore[arg-type]
    assert not kinds(run, "step")  # type: ignore[arg-type]


def test_liger_kernels_where_they_cannot_run_fall_back_with_a_notice(tmp_path: Path, runs_dir: Path) -> None:
    """`use_liger_kernel = true` on a box without CUDA trains without the kernels, and says so by key."""
    recipe = tmp_path / "liger.toml"
    recipe.write_text(TINY.read_text().replace('path = "data/', f'path = "{REPO}/recipes/data/')
                      .replace("[data]", "use_liger_kernel = true\n\n[data]"))
    result = loratui("run", str(recipe), "--headless", "--max-steps", "2", "--runs-dir", str(runs_dir))
    assert result.returncode == 0, result.stdout[-1500:] + result.stderr[-1500:]
    run = only_run(runs_dir)
    notices = [e for e in kinds(run, "notice") if e.get("key") == "training.use_liger_kernel"]
    assert notices and "liger kernels unavailable" in str(notices[0]["message"])
    assert "Traceback" not in (run / "trainer.stderr.log").read_text()
