"""The alert a run sends when it suspends before its Slurm time limit to requeue its job (trial 10: the phone
was told "suspended: checkpoint written, memory freed; `loratui resume` continues", while the requeued job's
next start resumes the run by itself, and a `loratui resume` on the login node would run it outside the job)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, TINY, kinds, only_run, wait_for
from tests.slurm_helpers import Jobs, jobs, needs_slurm, runs  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.slow, needs_slurm]


def requeued_run(runs: Path, jobs: Jobs, tmp_path: Path) -> tuple[str, Path]:  # noqa: F811
    """The tiny recipe as a 2-minute job that saves 60 s before its limit and requeues: its job id and run, once the
    run has suspended for the requeue."""
    recipe = tmp_path / "tiny-slurm.toml"
    recipe.write_text(TINY.read_text().replace('path = "data/', f'path = "{REPO}/recipes/data/')
                      .replace("max_steps = 300", "max_steps = 5000")
                      + '\n[slurm]\nsave_before_limit = "60s"\nrequeue = true\n')
    job = jobs.submit([sys.executable, "-m", "loratui", "run", str(recipe), "--headless", "--runs-dir", str(runs)],
                      "-t", "2", "--requeue")
    run = wait_for(lambda: any(p.is_dir() for p in runs.iterdir()) and only_run(runs), timeout=300)
    assert isinstance(run, Path)
    wait_for(lambda: any("requeued" in str(s.get("reason")) for s in kinds(run, "state")), timeout=300)
    return job, run


def test_the_suspend_before_a_requeue_alerts_that_the_job_resumes_it(runs: Path, jobs: Jobs,  # noqa: F811
                                                                     tmp_path: Path) -> None:
    job, run = requeued_run(runs, jobs, tmp_path)
    told = wait_for(lambda: [str(e["message"]) for e in kinds(run, "notice")
                             if e.get("key") == "alert" and str(e["message"]).startswith("suspended")], timeout=120)
    assert isinstance(told, list) and len(told) == 1, told
    assert "loratui resume" not in told[0] and f"Slurm job {job}" in told[0] and "requeue" in told[0], told


def test_the_requeued_jobs_start_sends_no_stale_alert(runs: Path, jobs: Jobs, tmp_path: Path) -> None:  # noqa: F811
    """Trial 10: each start of the requeued job (its new supervisor adopting the run) sent the history's alerts
    again: "Slurm time limit: the run will not finish ..." of the first start, and one "suspended: ...
    `loratui resume` continues" per earlier suspend, before its trainer had loaded."""
    import subprocess

    from tests.slurm_helpers import job_state

    job, run = requeued_run(runs, jobs, tmp_path)
    wait_for(lambda: job_state(job) == "PENDING", timeout=120)
    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True, timeout=60)
    restarted = wait_for(lambda: next((s for s in kinds(run, "state") if "restart 1" in str(s.get("reason"))), None),
                         timeout=300)
    assert isinstance(restarted, dict)
    wait_for(lambda: any(float(s["t"]) > float(restarted["t"]) and s["state"] == "training"  # type: ignore[arg-type]
                         for s in kinds(run, "state")), timeout=300)
    alerts = [(float(e["t"]), str(e["message"])) for e in kinds(run, "notice") if e.get("key") == "alert"]  # type: ignore[arg-type]
    first = {m for t, m in alerts if t < float(restarted["t"])}  # type: ignore[arg-type]
    again = [m for t, m in alerts if t > float(restarted["t"]) and m in first]  # type: ignore[arg-type]
    assert first and not again, (first, again)  # nothing the first start said is sent again
