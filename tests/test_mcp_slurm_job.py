"""The MCP tools say which Slurm job a run is (trial 10: an agent asked about job 213, `run_status 213` found
the run, but neither list_runs nor run_status said its job, node or Slurm's word on it, which `loratui ls`,
the list the server serves, shows)."""
from __future__ import annotations

from pathlib import Path

from loratui import events
from loratui.commands import agent_view
from loratui.rundir import RunDir
from tests.conftest import write_run

FORGOTTEN = "987654322"  # a job Slurm does not know (any more): the run's own record answers


def _run(runs: Path) -> RunDir:
    path = runs / "20261205-130008-tiny"
    return write_run(path, [events.Header(t=1.0, schema=1, run_id=path.name, recipe_hash="h", name="tiny",
                                slurm={"SLURM_JOB_ID": FORGOTTEN, "SLURM_JOB_NUM_NODES": "1"}, node="vm"),
                  events.State(t=2.0, state=events.TRAINING, step=0),
                  events.End(t=3.0, state=events.STOPPED, step=5, cause="CANCELLED",
                             error=f"Slurm: job {FORGOTTEN} CANCELLED: the job was cancelled")])  # type: ignore[no-any-return]


def test_list_runs_and_run_status_name_the_job_its_node_and_its_end(tmp_path: Path) -> None:
    run = _run(tmp_path / "runs")
    job = {"job": FORGOTTEN, "node": "vm", "state": "CANCELLED"}
    (row,) = agent_view.list_runs(tmp_path / "runs")
    assert row["slurm"] == job, row
    assert agent_view.status(run)["slurm"] == job
    assert agent_view.status(run)["end"]["cause"] == "CANCELLED"
