"""`loratui run -- COMMAND` inside real Slurm jobs (the one-node cluster of tests/slurm/start_cluster.sh):
seen, listed, attached and controlled from outside the job."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, kinds, only_run, read_events, wait_for
from tests.slurm_helpers import Jobs, job_env, loratui_cli, needs_slurm, wait_state
from tests.slurm_helpers import jobs, model_dir, runs  # noqa: F401  (fixtures, shared by the Slurm tests)

pytestmark = [pytest.mark.slow, needs_slurm]
SCRIPTS = REPO / "tests" / "data" / "scripts"


def _watched(runs: Path, *command: str) -> list[str]:
    return [sys.executable, "-m", "loratui", "run", "--headless", "--runs-dir", str(runs), "--", *command]


def _seed(model: Path, out: Path, steps: int) -> list[str]:
    return [sys.executable, str(SCRIPTS / "seed_trainer.py"), "--model", str(model), "--out", str(out),
            "--max-steps", str(steps), "--lora-dropout", "0"]


def _steps(run: Path) -> list[int]:
    return [int(e["step"]) for e in kinds(run, "step")]  # type: ignore[arg-type]


def _state(run: Path) -> str:
    states = kinds(run, "state")
    return str(states[-1]["state"]) if states else ""


def _run_of(runs: Path) -> Path:
    return wait_for(lambda: any(p.is_dir() for p in runs.iterdir()) and only_run(runs), timeout=300)  # type: ignore[return-value]


def test_a_watched_training_in_a_batch_job_is_seen_and_controlled_from_outside(
        model_dir: Path, runs: Path, jobs: Jobs, tmp_path: Path) -> None:
    job = jobs.submit(_watched(runs, *_seed(model_dir, tmp_path / "out", 40)), "-t", "30", "-J", "tiny-lora")
    run = _run_of(runs)
    wait_for(lambda: read_events(run), timeout=300)
    header = read_events(run)[0]
    assert header["slurm"]["SLURM_JOB_ID"] == job and header["slurm"]["SLURM_JOB_NAME"] == "tiny-lora"  # type: ignore[index]
    assert header["node"]
    wait_for(lambda: len(_steps(run)) >= 2, timeout=600)

    listed = json.loads(loratui_cli("ls", "--json", "--runs-dir", str(runs)).stdout)
    assert listed[0]["slurm"]["job"] == job and listed[0]["slurm"]["state"] == "RUNNING", listed
    assert listed[0]["slurm"]["nodes"] == 1 and 0 < listed[0]["slurm"]["time_left_s"] <= 30 * 60, listed
    table = loratui_cli("ls", "--runs-dir", str(runs)).stdout
    assert "JOB" in table and "RUNNING" in table and job in table, table

    # Paused by job id from this host (the socket), resumed as from a login node (files in the run dir).
    said = loratui_cli("pause", job, "--runs-dir", str(runs))
    assert said.returncode == 0, said.stderr
    wait_for(lambda: _state(run) == "paused", timeout=300)
    held = len(_steps(run))
    elsewhere = job_env(SLURMD_NODENAME="login-node")
    listed_there = json.loads(loratui_cli("ls", "--json", "--runs-dir", str(runs), env=elsewhere).stdout)
    assert listed_there[0]["state"] == "paused", listed_there  # alive by Slurm's word, not by a pid
    assert len(_steps(run)) == held
    said = loratui_cli("resume", job, "--runs-dir", str(runs), env=elsewhere)
    assert said.returncode == 0 and "through its run directory" in said.stdout, said.stdout + said.stderr
    wait_for(lambda: len(_steps(run)) > held, timeout=300)
    assert [e["source"] for e in kinds(run, "control")] == ["cli", "cli"]

    attached = loratui_cli("attach", job, "--headless", "--runs-dir", str(runs), timeout=900)
    assert attached.returncode == 0 and "finished at step 40" in attached.stdout, attached.stdout[-2000:]
    wait_state(job, "COMPLETED")
    assert kinds(run, "end")[0]["state"] == "finished"
