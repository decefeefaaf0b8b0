"""The MCP tools say which Slurm job a run is (trial 10: an agent asked about job 213, `run_status 213` found
the run, but neither list_runs nor run_status said its job, node or Slurm's word on it, which `loratui ls`,
the list the server serves, shows)."""
from __future__ import annotations

from pathlib import Path

import pytest

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


def test_a_forgotten_job_whose_run_ended_on_its_own_is_ended_not_unknown(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trial 14: ten minutes after job 130 failed (its script's own ModuleNotFoundError), `ls` read `job 130:
    unknown` and list_runs `"state": "unknown"`; the run ended, so did its job. A run still going with a
    forgotten job stays unknown."""
    import json

    from loratui.cli import main

    path = tmp_path / "runs" / "20261206-005817-train"
    write_run(path, [events.Header(t=1.0, schema=1, run_id=path.name, recipe_hash="h", name="train",
                                   slurm={"SLURM_JOB_ID": FORGOTTEN, "SLURM_JOB_NUM_NODES": "1"}, node="vm"),
                     events.End(t=3.0, state=events.FAILED, exit_code=1, step=0, error="ModuleNotFoundError")])
    (row,) = agent_view.list_runs(tmp_path / "runs")
    assert row["slurm"]["state"] == "ended", row
    assert main(["ls", "--json", "--runs-dir", str(tmp_path / "runs")]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert listed["slurm"]["state"] == "ended", listed
    going = tmp_path / "more" / "20261206-005900-train"
    write_run(going, [events.Header(t=1.0, schema=1, run_id=going.name, recipe_hash="h", name="train",
                                    slurm={"SLURM_JOB_ID": FORGOTTEN, "SLURM_JOB_NUM_NODES": "1"}, node="vm"),
                      events.State(t=2.0, state=events.TRAINING, step=0)])
    (row,) = agent_view.list_runs(tmp_path / "more")
    assert row["slurm"]["state"] == "unknown", row
