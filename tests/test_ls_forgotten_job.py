"""`loratui ls` on a Slurm run whose job Slurm has forgotten (trial 10: without accounting, slurmctld drops a
job MinJobAge seconds after its end; five minutes after `scancel`, job 213's row said `unknown`, though its
run had recorded the end Slurm gave it: CANCELLED)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from loratui import events
from loratui.cli import main
from tests.conftest import write_run

FORGOTTEN = "987654321"  # no job of this id is known to Slurm (none here at all without a cluster)


def _run(runs: Path, name: str, end: events.End) -> None:
    write_run(runs / name, [events.Header(t=1.0, schema=1, run_id=name, recipe_hash="h", name="tiny",
                                          slurm={"SLURM_JOB_ID": FORGOTTEN, "SLURM_JOB_NUM_NODES": "1"}, node="vm"),
                            events.State(t=2.0, state=events.TRAINING, step=0), end])


def test_a_forgotten_jobs_row_says_the_end_its_run_recorded(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    _run(runs, "20261205-130008-tiny", events.End(t=3.0, state=events.STOPPED, step=5, cause="CANCELLED",
                                                  error=f"Slurm: job {FORGOTTEN} CANCELLED"))
    assert main(["ls", "--runs-dir", str(runs), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["slurm"]["job"] == FORGOTTEN and row["slurm"]["state"] == "CANCELLED", row
    assert main(["ls", "--runs-dir", str(runs)]) == 0
    table = capsys.readouterr().out
    assert "CANCELLED" in table and "unknown" not in table, table
