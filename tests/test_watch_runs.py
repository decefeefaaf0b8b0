"""`loratui run -- COMMAND` with real processes on the CPU: user scripts that know nothing of loratui.

The scripts (tests/data/scripts/) load the embedded tiny model through `from_pretrained` from a
directory of their own, as a user's script loads a hub checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from loratui.supervisor import control
from loratui.supervisor.command import pause_words
from tests.conftest import REPO, kinds, loratui, only_run, read_events, wait_for, watched_pids
from tests.test_run import tokens_by_step

pytestmark = pytest.mark.slow
SCRIPTS = REPO / "tests" / "data" / "scripts"
# One thread per process: the CI box has two cores, and torchrun runs two ranks on them.
ENV = dict(os.environ, OMP_NUM_THREADS="1", HF_TOKEN="hf_secret_value", TOKENIZERS_PARALLELISM="false")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> Path:
    """The tiny model copied to a directory of its own, as a downloaded checkpoint would be."""
    from loratui.trainer.tiny import ensure_tiny_model

    target = tmp_path_factory.mktemp("model") / "tiny-qwen2"
    shutil.copytree(ensure_tiny_model(), target)
    return target


@pytest.fixture
def watch_dir() -> Iterator[Path]:
    """A runs directory with a short path (a control socket's path has at most 107 bytes, and pytest's tmp
    paths are long); its supervisors and watched commands are killed after the test."""
    runs = Path(tempfile.mkdtemp(prefix="lw-", dir="/tmp"))
    yield runs
    for run in runs.glob("*/"):
        pids = watched_pids(run)
        if (run / "supervisor.pid").exists():
            pids.append(int((run / "supervisor.pid").read_text().split()[0]))  # "pid start-time"
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    shutil.rmtree(runs, ignore_errors=True)


def _start(runs: Path, *command: str, cwd: Path = REPO) -> subprocess.Popen[str]:
    """`loratui run --headless -- COMMAND` as a terminal would start it: its own session."""
    return subprocess.Popen([sys.executable, "-m", "loratui", "run", "--headless", "--runs-dir", str(runs), "--",
                             *command], cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def _run(runs: Path) -> Path:
    return wait_for(lambda: runs.exists() and any(runs.iterdir()) and only_run(runs))  # type: ignore[return-value]


def _steps(run: Path, rank: int = 0) -> list[int]:
    return [int(e["step"]) for e in kinds(run, "step") if e.get("rank", 0) == rank]  # type: ignore[arg-type]


def _wait_step(run: Path, step: int, rank: int = 0, timeout: float = 300) -> None:
    wait_for(lambda: any(s >= step for s in _steps(run, rank)), timeout=timeout)


def _state(run: Path) -> str:
    states = kinds(run, "state")
    return str(states[-1]["state"]) if states else ""


def _losses(run: Path) -> dict[int, float]:
    found = {}
    for e in kinds(run, "log"):
        values = e["values"]
        if "loss" in values and "train_runtime" not in values:  # type: ignore[operator]
            found[int(e["step"])] = float(values["loss"])  # type: ignore[index,arg-type]
    return found


def _holds(run: Path, seconds: float, rank: int = 0) -> None:
    """No step is recorded for `seconds` (longer than several steps of this run)."""
    held = len(_steps(run, rank))
    time.sleep(seconds)
    assert len(_steps(run, rank)) == held


def _settled(run: Path, quiet_s: float = 0.6) -> None:
    """Wait until the log gains no step for `quiet_s`: lines printed just before a stop are still read."""
    seen = -1
    for _ in range(50):
        if len(_steps(run)) == seen:
            return
        seen = len(_steps(run))
        time.sleep(quiet_s)


def _step_seconds(run: Path) -> float:
    times = [float(e["step_time"]) for e in kinds(run, "step")][1:]  # type: ignore[arg-type]
    return sum(times) / len(times) if times else 1.0


def _seed(model: Path, out: Path, steps: int, *extra: str) -> list[str]:
    return [sys.executable, str(SCRIPTS / "seed_trainer.py"), "--model", str(model), "--out", str(out),
            "--max-steps", str(steps), *extra]


def test_seed_script_is_recorded_like_a_recipe(model_dir: Path, watch_dir: Path, tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "loratui", "run", "--headless", "--runs-dir", str(watch_dir),
                             "--warn-gb", "20", "--", *_seed(model_dir, tmp_path / "out", 8)],
                            cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run = only_run(watch_dir)
    assert run.name.endswith("seed_trainer")
    header = read_events(run)[0]
    assert header["command"][1].endswith("seed_trainer.py") and header["cwd"] == str(tmp_path.resolve())  # type: ignore[index]
    assert header["env"]["HF_TOKEN"] == "<redacted>" and "hf_secret_value" not in (run / "events.jsonl").read_text()  # type: ignore[index]
    assert _steps(run) == list(range(1, 9)) and sorted(_losses(run)) == list(range(1, 9))
    phases = {(e["name"], e["edge"]) for e in kinds(run, "phase")}
    assert {("train", "begin"), ("train", "end")} <= phases
    begin = kinds(run, "train_begin")
    assert len(begin) == 1 and set(begin[0]["controls"]) == {"pause", "resume", "save", "stop", "suspend"}  # type: ignore[arg-type]
    assert begin[0]["params_trainable"] and begin[0]["max_length"] > 0  # type: ignore[operator]
    assert kinds(run, "estimate") and kinds(run, "estimate")[0]["peak_device_gib"] > 0  # type: ignore[operator]
    assert kinds(run, "estimate")[0]["runtime"]["loss"] == "logits"  # type: ignore[index]  # the model's own loss
    live = (run / "recipe.toml").read_text()  # the live settings, for the advice
    assert "per_device_train_batch_size = 4" in live and "r = 8" in live and "warn_gb = 20.0" in live
    assert all(e.get("step_time", 0) > 0 for e in kinds(run, "step"))
    end = kinds(run, "end")[0]
    assert end["state"] == "finished" and end["exit_code"] == 0
    assert (tmp_path / "out" / "final").is_dir()  # the script's own code after train() ran
    assert any("saved the adapter" in line for e in kinds(run, "output") for line in e["lines"])  # type: ignore[attr-defined]


def test_a_second_trainer_counts_on_after_the_first(model_dir: Path, watch_dir: Path, tmp_path: Path) -> None:
    """A warm-up Trainer (4 steps) then the main one (6), each train() from step 1: the main phase's steps 1..6
    were recorded as 1..6, on the warm-up's curve. They are the run's steps 5..10, its TrainBegin starts at 4 of
    10, a notice says how its steps map, the tokens seen count on, and replay's summary sees one 10-step run."""
    script = [sys.executable, str(SCRIPTS / "two_phases.py"), "--model", str(model_dir), "--out", str(tmp_path / "o")]
    result = subprocess.run([sys.executable, "-m", "loratui", "run", "--headless", "--runs-dir", str(watch_dir),
                             "--", *script], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run = only_run(watch_dir)
    assert _steps(run) == list(range(1, 11))
    assert [int(e["step"]) for e in kinds(run, "log") if "loss" in e["values"]] == list(range(1, 11))  # type: ignore[index]
    begins = [(e.get("start_step", 0), e["max_steps"]) for e in kinds(run, "train_begin")]
    assert begins == [(0, 4), (4, 10)]
    assert [(e["edge"], e.get("step", 0)) for e in kinds(run, "phase")] == [
        ("begin", 0), ("end", 4), ("begin", 4), ("end", 10)]
    seen = [int(e["tokens_seen"]) for e in kinds(run, "step")]  # type: ignore[arg-type]
    assert seen == sorted(seen) and seen[4] > seen[3]
    notices = [str(e["message"]) for e in kinds(run, "notice") if e.get("key") == "train_phase"]
    assert len(notices) == 1 and "step 4 + N" in notices[0], notices
    assert kinds(run, "end")[0]["step"] == 10 and kinds(run, "exit")[0]["step"] == 10
    summary = json.loads(loratui("replay", "--summary", str(run)).stdout)
    assert summary["steps"] == 10


def test_a_second_trainer_suspended_resumes_where_it_stopped(model_dir: Path, watch_dir: Path,
                                                             tmp_path: Path) -> None:
    """Suspend in the main phase of a warm-up + main script, then resume: the resumed process runs the script from
    its start, and its first train() (the warm-up) took the main phase's checkpoint (it trained one step at the main
    phase's learning rate, recorded after its own 4), then the main phase trained again from its step 1. Now the
    main phase resumes from its checkpoint at the run's step where it stopped, the warm-up runs again as the script
    asks (recorded again from step 1, and said so), and every loss and token count is the uninterrupted run's."""
    def script(out: str) -> list[str]:
        return [sys.executable, str(SCRIPTS / "two_phases.py"), "--model", str(model_dir), "--out", str(tmp_path / out),
                "--main-steps", "20"]

    viewer = _start(watch_dir, *script("o"))
    run = _run(watch_dir)
    _wait_step(run, 6)
    control.send(run / "control.sock", "suspend")
    wait_for(lambda: any(e["state"] == "suspended" for e in kinds(run, "state")), timeout=120)
    stopped_at = max(_steps(run))
    assert 6 <= stopped_at < 24, stopped_at
    control.send(run / "control.sock", "resume")
    out, _ = viewer.communicate(timeout=900)
    assert kinds(run, "end")[0]["state"] == "finished", out[-3000:]
    resumed_t = next(float(e["t"]) for e in kinds(run, "control") if e["command"] == "resume")  # type: ignore[arg-type]
    again = [int(e["step"]) for e in kinds(run, "step") if float(e["t"]) > resumed_t]  # type: ignore[arg-type]
    assert again == [1, 2, 3, 4, *range(stopped_at + 1, 25)], again
    begins = [(e.get("start_step", 0), e["max_steps"]) for e in kinds(run, "train_begin")]
    assert begins == [(0, 4), (4, 24), (0, 4), (stopped_at, 24)], begins
    notices = [str(e["message"]) for e in kinds(run, "notice") if e.get("key") == "train_phase"]
    assert len(notices) == 3 and "runs again" in notices[1] and "resumed at its step" in notices[2], notices
    straight = watch_dir / "straight"  # the same script, never interrupted
    reference = loratui("run", "--headless", "--runs-dir", str(straight), "--", *script("o2"), timeout=900, env=ENV)
    assert reference.returncode == 0, reference.stdout[-2000:]
    a, b = _losses(only_run(straight)), _losses(run)
    assert sorted(b) == sorted(a) == list(range(1, 25))
    for step in range(1, 25):
        assert b[step] == pytest.approx(a[step], rel=1e-3), step
    assert tokens_by_step(run) == tokens_by_step(only_run(straight))
    assert kinds(run, "end")[0]["step"] == 24


def test_seed_script_pauses_suspends_and_resumes_on_the_same_loss_curve(model_dir: Path, watch_dir: Path,
                                                                           tmp_path: Path) -> None:
    # 24 steps, not 8: on a loaded 2-core box this test saw step 2 late, and the run had finished its 8 steps before
    # the suspend reached it ("the trainer is not running"); the suspend must land while steps remain
    steps = 24
    viewer = _start(watch_dir, *_seed(model_dir, tmp_path / "out-b", steps, "--lora-dropout", "0"))
    run = _run(watch_dir)
    _wait_step(run, 2)
    control.send(run / "control.sock", "pause")
    wait_for(lambda: _state(run) == "paused", timeout=120)
    _holds(run, max(1.5, 3 * _step_seconds(run)))
    control.send(run / "control.sock", "resume")
    paused_at = max(_steps(run))
    _wait_step(run, paused_at + 1)
    control.send(run / "control.sock", "suspend")
    wait_for(lambda: any(e["state"] == "suspended" for e in kinds(run, "state")), timeout=120)
    pid = int(kinds(run, "train_begin")[0]["pid"])  # type: ignore[arg-type]
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), timeout=60)  # the process (and its memory) is gone
    assert kinds(run, "checkpoint")
    control.send(run / "control.sock", "resume")
    out, _ = viewer.communicate(timeout=900)
    assert kinds(run, "end")[0]["state"] == "finished", out[-3000:]
    assert len(kinds(run, "train_begin")) == 2
    straight = watch_dir / "straight"  # the same script, never interrupted
    reference = loratui("run", "--headless", "--runs-dir", str(straight), "--",
                        *_seed(model_dir, tmp_path / "out-a", steps, "--lora-dropout", "0"), timeout=900, env=ENV)
    assert reference.returncode == 0, reference.stdout[-2000:]
    a, b = _losses(only_run(straight)), _losses(run)
    assert sorted(b) == list(range(1, steps + 1))
    for step in range(1, steps + 1):  # bit-identical on this box, now that the script seeds before get_peft_model
        assert b[step] == pytest.approx(a[step], rel=1e-3), step
    assert tokens_by_step(run) == tokens_by_step(only_run(straight))  # the run's count goes on across lives


def test_trl_sft_trainer_is_watched_and_stops(model_dir: Path, watch_dir: Path, tmp_path: Path) -> None:
    viewer = _start(watch_dir, sys.executable, str(SCRIPTS / "trl_sft.py"), "--model", str(model_dir),
                    "--out", str(tmp_path / "out"), "--max-steps", "500")
    run = _run(watch_dir)
    _wait_step(run, 2)
    assert kinds(run, "estimate") and _losses(run)
    assert kinds(run, "estimate")[0]["runtime"]["loss"] == "chunked"  # type: ignore[index]  # TRL's fused LM head
    assert "SFTConfig.max_length" not in (run / "recipe.toml").read_text()
    control.send(run / "control.sock", "pause")
    wait_for(lambda: _state(run) == "paused", timeout=120)
    _holds(run, max(1.5, 3 * _step_seconds(run)))
    control.send(run / "control.sock", "resume")
    wait_for(lambda: _state(run) == "training", timeout=60)
    result = loratui("stop", str(run), "--runs-dir", str(watch_dir))
    assert result.returncode == 0, result.stderr
    viewer.communicate(timeout=300)
    end = kinds(run, "end")[0]
    assert end["state"] == "stopped" and max(_steps(run)) < 500


def test_plain_loop_is_read_from_its_output_and_paused_by_sigstop(watch_dir: Path) -> None:
    viewer = _start(watch_dir, sys.executable, str(SCRIPTS / "plain_loop.py"), "80")
    run = _run(watch_dir)
    _wait_step(run, 5)
    begin = kinds(run, "train_begin")[0]
    assert begin["max_steps"] == 80 and begin["pause_mode"] == "signal"
    refused = loratui("save", str(run), "--runs-dir", str(watch_dir))
    assert refused.returncode == 2 and "needs a transformers Trainer" in refused.stderr
    control.send(run / "control.sock", "pause")
    # What is held is what the machine has: a CPU box said "GPU memory stays held" (a tmux trial).
    reason, note = pause_words(bool(kinds(run, "header")[0].get("gpu_totals")))
    assert _state(run) == "paused" and kinds(run, "state")[-1]["reason"] == reason
    assert any(e["message"] == note for e in kinds(run, "notice"))
    pids = watched_pids(run)
    assert pids  # SIGSTOP is sent; the kernel stops each process when it next runs
    wait_for(lambda: all(Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "T" for pid in pids),
             timeout=10)
    _settled(run)  # output printed before the stop still reaches the log (it is tailed every 0.25 s)
    # a step takes 0.1 s; held past _held_time_is_no_step_time's 2.5 s by this hold alone (settling can take only
    # 0.6 s: 0.6 + 1.5 s once made a 2.12 s pause, and the test failed on its own wait)
    _holds(run, 2.6)
    control.send(run / "control.sock", "resume")
    out, _ = viewer.communicate(timeout=300)
    assert kinds(run, "end")[0]["state"] == "finished", out[-2000:]
    steps, losses = _steps(run), _losses(run)
    assert steps[-1] == 80 and steps == sorted(set(steps)) and len(losses) >= 10
    assert losses[max(losses)] < losses[min(losses)]  # the printed loss falls
    lines = [line for e in kinds(run, "output") for line in e["lines"]]  # type: ignore[attr-defined]
    assert "done" in lines and not any("\r" in line for line in lines)  # the bar collapsed to its last state
    _held_time_is_no_step_time(run)


def test_a_loops_own_step_key_is_the_records_step(watch_dir: Path) -> None:
    """A loop printing `{'loss': ..., 'step': N}` on stdout with tqdm on stderr: each record is logged at its own
    step (the bar's position, read from the other stream, gave 1, 60, 61, 62 in a 60-step run, out of order, and a
    replay summary's `min_loss_step` of 62)."""
    viewer = _start(watch_dir, sys.executable, str(SCRIPTS / "dict_loop.py"), "60")
    run = _run(watch_dir)
    out, _ = viewer.communicate(timeout=300)
    assert kinds(run, "end")[0]["state"] == "finished", out[-2000:]
    logs = [(int(e["step"]), e["values"]) for e in kinds(run, "log")]  # type: ignore[arg-type]
    assert [step for step, _ in logs] == list(range(5, 61, 5)), logs
    assert all("step" not in values for _, values in logs)  # the step is the record's, not a metric of it
    summary = json.loads(loratui("replay", "--summary", str(run)).stdout)
    assert summary["min_loss_step"] == 60 and summary["steps"] == 60


def test_a_plain_loops_second_phase_counts_on(watch_dir: Path) -> None:
    """A loop printing `step 1/6 .. step 6/6` twice: its second phase's losses were logged at steps 1..6 again, over
    the first phase's curve, with no step recorded; they are the run's steps 7..12, as a second Trainer's are."""
    viewer = _start(watch_dir, sys.executable, str(SCRIPTS / "restart_loop.py"), "6")
    run = _run(watch_dir)
    out, _ = viewer.communicate(timeout=300)
    assert kinds(run, "end")[0]["state"] == "finished", out[-2000:]
    assert _steps(run) == list(range(1, 13)) and sorted(_losses(run)) == list(range(1, 13))
    assert _losses(run)[7] == 1.5 and _losses(run)[12] == 0.25
    assert [(e.get("start_step", 0), e["max_steps"]) for e in kinds(run, "train_begin")] == [(0, 6), (6, 12)]
    assert kinds(run, "end")[0]["step"] == 12 and kinds(run, "exit")[0]["step"] == 12
    summary = json.loads(loratui("replay", "--summary", str(run)).stdout)
    assert summary["steps"] == 12 and summary["min_loss_step"] == 12


def test_a_crash_is_placed_at_the_step_it_followed(watch_dir: Path) -> None:
    """A loop that crashes after printing step 25: its stdout and stderr were tailed by two threads, and the
    traceback was read before the last five steps' lines (the doctor said `cuda_error (step 20)`); the last
    `step N loss X` line was also held until the output closed (step 24)."""
    viewer = _start(watch_dir, sys.executable, str(SCRIPTS / "crash_loop.py"))
    run = _run(watch_dir)
    viewer.communicate(timeout=300)
    assert kinds(run, "end")[0]["state"] == "failed"
    said = loratui("doctor", str(run), "--json")
    first = json.loads(said.stdout)[0]
    assert first["id"] == "cuda_error" and first["step"] == 25, said.stdout


def _held_time_is_no_step_time(run: Path) -> None:
    """The steps read after the resume took the time that passed since (tqdm's smoothed rate carried the pause
    into a dozen steps after it: 3.26 s, 2.43 s, 1.85 s for 0.5 s steps)."""
    resumed = next(float(e["t"]) for e in kinds(run, "control") if e["command"] == "resume")  # type: ignore[arg-type]
    paused = next(float(e["t"]) for e in kinds(run, "control") if e["command"] == "pause")  # type: ignore[arg-type]
    steps = [(int(e["step"]), float(e["t"]), float(e["step_time"])) for e in kinds(run, "step")]  # type: ignore[arg-type]
    first = next(i for i, (_, t, _) in enumerate(steps) if t > resumed)
    counted = sum((n - steps[i - 1][0]) * took for i, (n, _, took) in enumerate(steps) if i >= first)
    assert resumed - paused > 2.5  # long enough to see: it is what a smoothed rate would add
    assert counted < steps[-1][1] - resumed + 1.0, (counted, steps[-1][1] - resumed)


def test_torchrun_records_and_pauses_both_ranks(model_dir: Path, watch_dir: Path, tmp_path: Path) -> None:
    launcher = [shutil.which("torchrun") or ""] if shutil.which("torchrun") else [sys.executable, "-m",
                                                                                  "torch.distributed.run"]
    viewer = _start(watch_dir, *launcher, "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port",
                    str(_free_port()), str(SCRIPTS / "seed_trainer.py"), "--model", str(model_dir), "--out",
                    str(tmp_path / "out"), "--max-steps", "500", "--ddp-backend", "gloo")
    run = _run(watch_dir)
    _wait_step(run, 2, rank=1)
    begin = kinds(run, "train_begin")
    assert len(begin) == 1 and begin[0]["world_size"] == 2 and "suspend" not in begin[0]["controls"]  # type: ignore[operator]
    control.send(run / "control.sock", "pause")
    wait_for(lambda: _state(run) == "paused", timeout=120)
    time.sleep(0.5)
    held = (len(_steps(run, 0)), len(_steps(run, 1)))
    time.sleep(max(1.5, 3 * _step_seconds(run)))
    assert (len(_steps(run, 0)), len(_steps(run, 1))) == held and abs(held[0] - held[1]) <= 1
    control.send(run / "control.sock", "resume")
    _wait_step(run, max(_steps(run, 1)) + 1, rank=1)
    control.send(run / "control.sock", "stop")
    out, _ = viewer.communicate(timeout=300)
    # Said whole when it fails (once in eight slow lanes it ended `failed`; the cause was never seen): the end,
    # torchrun's exit as its keeper saw it, when the stop came, and the last of torchrun's stderr.
    seen = (kinds(run, "end"), kinds(run, "exit"), kinds(run, "control")[-1:], out[-1000:],
            (run / "trainer.stderr.log").read_text(errors="replace")[-3000:])
    assert kinds(run, "end")[0]["state"] == "stopped", seen
    wait_for(lambda: not watched_pids(run), timeout=60)


def test_a_failing_script_ends_failed_and_the_doctor_explains_it(model_dir: Path, watch_dir: Path,
                                                                  tmp_path: Path) -> None:
    result = loratui("run", "--headless", "--runs-dir", str(watch_dir), "--",
                     *_seed(model_dir, tmp_path / "out", 50, "--fail-at", "2"), timeout=900, env=ENV)
    assert result.returncode == 1
    run = only_run(watch_dir)
    end = kinds(run, "end")[0]
    assert end["state"] == "failed" and end["exit_code"] == 1
    assert "OutOfMemoryError: CUDA out of memory" in str(end["error"])
    doctor = loratui("doctor", str(run))
    assert doctor.returncode == 1 and "out of memory" in doctor.stdout.lower(), doctor.stdout  # 1: an ERROR
    assert "change: TrainingArguments." in doctor.stdout, doctor.stdout  # the script's own words


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
