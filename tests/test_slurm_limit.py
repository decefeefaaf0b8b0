"""The job's time limit as a known event, on real `sbatch -t 1` jobs: the ETA warning, a checkpoint saved
before the limit, TIMEOUT recorded and explained, and a requeue that resumes the same run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, TINY, kinds, only_run, read_events, wait_for
from tests.slurm_helpers import Jobs, job_state, loratui_cli, needs_slurm, wait_state
from tests.slurm_helpers import endpoint, jobs, model_dir, runs  # noqa: F401  (fixtures, shared by the Slurm tests)
from tests.test_alerts import Endpoint

pytestmark = [pytest.mark.slow, needs_slurm]
SCRIPTS = REPO / "tests" / "data" / "scripts"


def _looked_at(runs: Path) -> bool:
    """`loratui ls`, as a user would: the end is written by the supervisor, or, where Slurm killed it first
    (KillWait after its SIGTERM), by whoever looks next."""
    return loratui_cli("ls", "--runs-dir", str(runs)).returncode == 0


def _run_of(runs: Path) -> Path:
    return wait_for(lambda: any(p.is_dir() for p in runs.iterdir()) and only_run(runs), timeout=300)  # type: ignore[return-value]


def _steps(run: Path) -> list[int]:
    return [int(e["step"]) for e in kinds(run, "step")]  # type: ignore[arg-type]


def test_a_one_minute_limit_warns_saves_before_it_and_ends_as_timeout(
        model_dir: Path, runs: Path, jobs: Jobs, endpoint: Endpoint, tmp_path: Path) -> None:
    seed = [sys.executable, str(SCRIPTS / "seed_trainer.py"), "--model", str(model_dir), "--out", str(tmp_path / "o"),
            "--max-steps", "5000"]
    job = jobs.submit([sys.executable, "-m", "loratui", "run", "--headless", "--notify", endpoint.url, "--runs-dir",
                       str(runs), "--save-before-limit", "35s", "--", *seed], "-t", "1")
    run = _run_of(runs)
    (end,) = wait_for(lambda: _looked_at(runs) and kinds(run, "end"), timeout=400, every=2)  # type: ignore[misc]
    assert end["state"] == "failed" and end["cause"] == "TIMEOUT", end
    assert f"Slurm: job {job} TIMEOUT" in str(end["error"])
    warned = [n for n in kinds(run, "notice") if n.get("key") == "time_limit"]
    assert warned and "will not finish before the time limit" in str(warned[0]["message"]), warned
    saved = kinds(run, "checkpoint")
    assert saved and float(saved[0]["t"]) < float(end["t"]), saved  # type: ignore[arg-type]
    assert [c["source"] for c in kinds(run, "control")][:1] == ["slurm"]
    bodies = lambda: [json.loads(r["body"]) for r in endpoint.requests]  # noqa: E731
    wait_for(lambda: any("TIMEOUT" in json.dumps(b) for b in bodies()), timeout=120)
    assert any(b["event"] == "time_limit" for b in bodies()), bodies()
    doctor = loratui_cli("doctor", str(run))
    assert "Slurm ended the job (TIMEOUT)" in doctor.stdout and "save_before_limit" in doctor.stdout, doctor.stdout
    assert wait_state(job, "TIMEOUT") == "TIMEOUT"


def test_requeue_saves_before_the_limit_and_the_requeued_job_resumes_the_same_run(
        runs: Path, jobs: Jobs, tmp_path: Path) -> None:
    recipe = tmp_path / "tiny-slurm.toml"
    recipe.write_text(TINY.read_text().replace('path = "data/', f'path = "{REPO}/recipes/data/')
                      .replace("max_steps = 300", "max_steps = 5000")
                      + '\n[slurm]\nsave_before_limit = "60s"\nrequeue = true\n')
    # Two minutes, saved 60 s before the end: room for a slow start on a loaded box before the save.
    job = jobs.submit([sys.executable, "-m", "loratui", "run", str(recipe), "--headless", "--runs-dir", str(runs)],
                      "-t", "2", "--requeue")
    run = _run_of(runs)
    wait_for(lambda: any("requeued" in str(s.get("reason")) for s in kinds(run, "state")), timeout=300)
    saved_at = int(kinds(run, "checkpoint")[-1]["step"])  # type: ignore[arg-type]
    wait_for(lambda: job_state(job) == "PENDING", timeout=120)
    # Slurm holds a requeued job ~2 minutes before it may start again; the test does not wait that out.
    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True, timeout=60)
    wait_for(lambda: any("restart 1" in str(s.get("reason")) for s in kinds(run, "state")), timeout=300)
    wait_for(lambda: max(_steps(run)) > saved_at + 2, timeout=300)
    assert only_run(runs) == run  # one run, one log, one loss curve
    restarted = next(s for s in kinds(run, "state") if "restart 1" in str(s.get("reason")))
    assert f"checkpoint-{saved_at}" in str(restarted["reason"]), restarted
    second = [s for s in read_events(run) if s.get("kind") == "step" and float(s["t"]) > float(restarted["t"])]  # type: ignore[arg-type]
    assert int(second[0]["step"]) == saved_at + 1, second[:2]  # type: ignore[arg-type]
    assert not kinds(run, "end")
    listed = json.loads(loratui_cli("ls", "--json", "--runs-dir", str(runs)).stdout)
    assert listed[0]["slurm"]["state"] == "RUNNING" and listed[0]["state"] == "training", listed


def test_a_job_slurm_requeues_mid_run_resumes_the_same_run_from_its_last_checkpoint(
        runs: Path, jobs: Jobs, tmp_path: Path) -> None:
    """Preemption in requeue mode, or an administrator's `scontrol requeue`: no end, the next start goes on."""
    recipe = tmp_path / "tiny-long.toml"
    recipe.write_text(TINY.read_text().replace('path = "data/', f'path = "{REPO}/recipes/data/')
                      .replace("max_steps = 300", "max_steps = 5000"))
    job = jobs.submit([sys.executable, "-m", "loratui", "run", str(recipe), "--headless", "--runs-dir", str(runs)],
                      "--requeue")
    run = _run_of(runs)
    wait_for(lambda: kinds(run, "checkpoint"), timeout=300)
    subprocess.run(["scontrol", "requeue", job], check=True, timeout=60)  # SIGKILLs every process of the job
    wait_for(lambda: job_state(job) == "PENDING", timeout=120)
    assert not kinds(run, "end")
    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True, timeout=60)
    wait_for(lambda: any("restart 1" in str(s.get("reason")) for s in kinds(run, "state")), timeout=300)
    restarted = next(s for s in kinds(run, "state") if "restart 1" in str(s.get("reason")))
    resumed_from = int(str(restarted["reason"]).rsplit("checkpoint-", 1)[1])
    wait_for(lambda: max(_steps(run)) > resumed_from + 2, timeout=300)
    assert only_run(runs) == run and not kinds(run, "end")
