"""`loratui ls` on a run whose Slurm job was requeued and waits to start again (trial 10: `scontrol requeue`
after checkpoint-10; for two minutes the row said `lost 15/40 ... PENDING`, though the job's next start resumes
that run from its checkpoint, as it then did)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loratui import events
from loratui.eventlog import EventWriter
from tests.conftest import wait_for
from tests.slurm_helpers import Jobs, cluster_reason, jobs, loratui_cli, runs, wait_state  # noqa: F401

pytestmark = pytest.mark.skipif(bool(cluster_reason()), reason=cluster_reason() or "a Slurm cluster answers")


def test_a_run_whose_job_waits_to_start_again_is_requeued_not_lost(runs: Path, jobs: Jobs) -> None:  # noqa: F811
    job_id = jobs.submit(["true"], "--hold")  # pending, as a requeued job waits for its next start
    wait_state(job_id, "PENDING")
    path = runs / "20261205-130054-tiny10"
    path.mkdir()
    log = EventWriter(path / "events.jsonl")
    for event in (events.Header(t=1.0, schema=1, run_id=path.name, recipe_hash="h", name="tiny10",
                                slurm={"SLURM_JOB_ID": job_id, "SLURM_JOB_NUM_NODES": "1"}, node="vm"),
                  events.State(t=2.0, state=events.TRAINING, step=0),
                  events.Checkpoint(t=3.0, step=10, path=str(path / "checkpoints" / "checkpoint-10"))):
        log.write(event)  # then every process of the job was killed by the requeue: no end
    log.close()

    def listed() -> dict[str, Any]:
        said = loratui_cli("ls", "--runs-dir", str(runs), "--json")
        assert said.returncode == 0, said.stderr
        (row,) = json.loads(said.stdout)
        return row  # type: ignore[no-any-return]

    # `ls` asks Slurm through a cache of a few seconds: the job submitted just now may not be in it yet
    row = wait_for(lambda: (r := listed()).get("slurm", {}).get("state") and r)
    assert isinstance(row, dict) and row["slurm"]["state"] == "PENDING" and row["state"] == "requeued", row
