"""`loratui resume` on a run that suspended before its Slurm time limit and requeued its job (trial 10: the
run's row said `suspended ... PENDING`; `resume` from the login node would start a supervisor there, outside
the job, and the job's next start, finding the run alive, would not resume it)."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from loratui import events
from loratui.eventlog import EventWriter
from tests.slurm_helpers import Jobs, cluster_reason, jobs, loratui_cli, runs, wait_state  # noqa: F401

pytestmark = pytest.mark.skipif(bool(cluster_reason()), reason=cluster_reason() or "a Slurm cluster answers")


def test_resume_refuses_a_run_its_pending_job_will_resume(runs: Path, jobs: Jobs) -> None:  # noqa: F811
    job_id = jobs.submit(["true"], "--hold")  # pending, as the requeued job waits for its next start
    wait_state(job_id, "PENDING")
    path = runs / "20261205-131739-tiny"
    path.mkdir()
    log = EventWriter(path / "events.jsonl")
    for event in (events.Header(t=1.0, schema=1, run_id=path.name, recipe_hash="h", name="tiny",
                                slurm={"SLURM_JOB_ID": job_id, "SLURM_JOB_NUM_NODES": "1"}, node="vm"),
                  events.State(t=2.0, state=events.TRAINING, step=0),
                  events.State(t=3.0, state=events.SUSPENDED, step=269),
                  events.State(t=3.1, state=events.SUSPENDED, reason=f"checkpoint saved before the time limit; "
                               f"Slurm job {job_id} requeued: its next start resumes this run from that checkpoint")):
        log.write(event)
    log.close()
    try:
        said = loratui_cli("resume", path.name, "--runs-dir", str(runs))
        assert said.returncode == 2, said.stdout + said.stderr
        assert f"job {job_id}" in said.stderr and "next start resumes" in said.stderr, said.stderr
        assert not (path / "supervisor.pid").exists()
    finally:
        pidfile = path / "supervisor.pid"
        if pidfile.exists():
            os.kill(int(pidfile.read_text().split()[0]), signal.SIGKILL)
