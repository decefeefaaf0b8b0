"""`loratui resume` on a run that suspended before its Slurm time limit and requeued its job (trial 10: the
run's row said `suspended ... PENDING`; `resume` from the login node would start a supervisor there, outside
the job, and the job's next start, finding the run alive, would not resume it)."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from loratui import events
from tests.slurm_helpers import Jobs, cluster_reason, jobs, loratui_cli, runs, waiting_job_run  # noqa: F401

pytestmark = pytest.mark.skipif(bool(cluster_reason()), reason=cluster_reason() or "a Slurm cluster answers")


def test_resume_refuses_a_run_its_pending_job_will_resume(runs: Path, jobs: Jobs) -> None:  # noqa: F811
    job_id, path = waiting_job_run(
        runs, jobs, "20261205-131739-tiny", events.State(t=3.0, state=events.SUSPENDED, step=269),
        lambda job_id, path: events.State(t=3.1, state=events.SUSPENDED, reason=(
            f"checkpoint saved before the time limit; Slurm job {job_id} requeued: its next start resumes this run "
            "from that checkpoint")))
    try:
        said = loratui_cli("resume", path.name, "--runs-dir", str(runs))
        assert said.returncode == 2, said.stdout + said.stderr
        assert f"job {job_id}" in said.stderr and "next start resumes" in said.stderr, said.stderr
        assert not (path / "supervisor.pid").exists()
    finally:
        pidfile = path / "supervisor.pid"
        if pidfile.exists():
            os.kill(int(pidfile.read_text().split()[0]), signal.SIGKILL)
