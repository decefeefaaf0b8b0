"""Trial 7 at 80x24: `loratui ls` with a Slurm run added its job columns (JOB, SLURM, NODES, LEFT) to every
row, about 100 columns, and the terminal broke each row in two ("RUNNIN" / "G" back at column 0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loratui.cli import main
from tests.test_error_wrap import _on_terminal
from tests.test_find_runs import _start_one, home  # noqa: F401  (the fixture)

JOB = "987654321"  # no cluster knows it: a run that ended reads "ended" whether or not slurmctld is up


def _as_slurm_run(root: Path, run_id: str) -> None:
    """The run's header says it started in a Slurm job, as `loratui run` records it inside one."""
    log = root / "proj" / "runs" / run_id / "events.jsonl"
    first, *rest = log.read_text().splitlines()
    header = json.loads(first) | {"slurm": {"SLURM_JOB_ID": JOB, "SLURM_JOB_NUM_NODES": "1"}}
    log.write_text("\n".join([json.dumps(header), *rest]) + "\n")


def test_a_slurm_run_keeps_every_ls_line_inside_an_80_column_terminal(home: Path,  # noqa: F811
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    run_id = _start_one(home, capsys)
    _as_slurm_run(home, run_id)
    shown = _on_terminal(["ls"], 80, home).splitlines()
    assert all(len(line) < 80 for line in shown), shown
    row = next(i for i, line in enumerate(shown) if line.startswith(run_id))
    assert shown[row].split()[1:3] == ["finished", "5/5"], shown
    assert shown[row + 1] == f"  job {JOB}: ended", shown  # the run finished: its job did (trial 14: "unknown")
    wide = _on_terminal(["ls"], 160, home).splitlines()  # wide enough: the job stays in its row, under JOB
    assert "JOB" in wide[0] and any(line.startswith(run_id) and JOB in line for line in wide), wide
    assert main(["ls"]) == 0  # piped: one row a run with its job columns, whatever the width (scripts read it)
    piped = capsys.readouterr().out.splitlines()
    assert "SLURM" in piped[0] and any(line.startswith(run_id) and JOB in line for line in piped), piped
