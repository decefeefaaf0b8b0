"""`loratui ls` on a run whose Slurm job was requeued and waits to start again (trial 10: `scontrol requeue`
after checkpoint-10; for two minutes the row said `lost 15/40 ... PENDING`, though the job's next start resumes
that run from its checkpoint, as it then did)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loratui import events
from tests.conftest import wait_for
from tests.slurm_helpers import Jobs, cluster_reason, jobs, loratui_cli, runs, waiting_job_run  # noqa: F401

pytestmark = pytest.mark.skipif(bool(cluster_reason()), reason=cluster_reason() or "a Slurm cluster answers")


def test_a_run_whose_job_waits_to_start_again_is_requeued_not_lost(runs: Path, jobs: Jobs) -> None:  # noqa: F811
    waiting_job_run(runs, jobs, "20261205-130054-tiny10", lambda job_id, path: events.Checkpoint(
        t=3.0, step=10, path=str(path / "checkpoints" / "checkpoint-10")))  # then the requeue killed it: no end

    def listed() -> dict[str, Any]:
        said = loratui_cli("ls", "--runs-dir", str(runs), "--json")
        assert said.returncode == 0, said.stderr
        (row,) = json.loads(said.stdout)
        return row  # type: ignore[no-any-return]

    # `ls` asks Slurm through a cache of a few seconds: the job submitted just now may not be in it yet
    row = wait_for(lambda: (r := listed()).get("slurm", {}).get("state") and r)
    assert isinstance(row, dict) and row["slurm"]["state"] == "PENDING" and row["state"] == "requeued", row


def test_a_run_suspended_before_its_limit_whose_job_waits_is_requeued(runs: Path, jobs: Jobs) -> None:  # noqa: F811
    """Trial 14, the README's batch script (`--save-before-limit 1m --requeue`): while the requeued job waited
    (PENDING, BeginTime) `ls` said `suspended`, where the README says `requeued`, and `loratui resume` refuses it."""
    waiting_job_run(runs, jobs, "20261206-005826-train", lambda job_id, path: events.Checkpoint(
        t=3.0, step=1534, path=str(path / "checkpoint-1534")), events.State(
        t=4.0, state=events.SUSPENDED, step=1534, reason="checkpoint saved before the time limit; Slurm job requeued"))
    said = wait_for(lambda: (r := loratui_cli("ls", "--runs-dir", str(runs), "--json")).returncode == 0 and
                    json.loads(r.stdout)[0].get("slurm", {}).get("state") and json.loads(r.stdout)[0])
    assert said["slurm"]["state"] == "PENDING" and said["state"] == "requeued", said


def test_the_apps_resume_on_a_run_whose_job_waits_says_the_job_will(runs: Path, jobs: Jobs) -> None:  # noqa: F811
    """Trial 14: `r` in the app attached to that run said "resume: the run is not running (no supervisor answers
    on its control socket)"; `loratui resume` says the job's next start resumes it. The app's keys now go the
    way the shell's commands do."""
    from loratui.cli import app_actions
    from loratui.rundir import RunDir
    from loratui.supervisor.control import ControlError

    job_id, path = waiting_job_run(runs, jobs, "20261206-005826-train", lambda job_id, path: events.Checkpoint(
        t=3.0, step=1534, path=str(path / "checkpoint-1534")), events.State(t=4.0, state=events.SUSPENDED, step=1534))
    with pytest.raises(ControlError, match=f"Slurm job {job_id} is PENDING: its next start resumes this run"):
        app_actions(RunDir(path)).send("resume")


def test_a_stop_of_a_run_whose_job_waits_says_to_cancel_the_job(runs: Path, jobs: Jobs) -> None:  # noqa: F811
    """Trial 14: `loratui stop 131` said "recorded as stopped", and the requeued job's next start began a new run
    from step 0, training until `scancel 131`."""
    from loratui.rundir import RunDir
    from loratui.supervisor.control import deliver

    job_id, path = waiting_job_run(runs, jobs, "20261206-005826-train",
                                   events.State(t=4.0, state=events.SUSPENDED, step=1534))
    said = deliver(RunDir(path), "stop")
    assert said.endswith(f"; its Slurm job {job_id} is PENDING and its next start would begin a new run from step "
                         f"0: scancel {job_id}"), said
