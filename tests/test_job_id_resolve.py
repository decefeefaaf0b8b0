"""A Slurm job id names a run in one place, `rundir.resolve`, so every command and the agent interface take it alike
(it was looked up by four commands one by one, and the MCP tools said "no run named '4242'"). A run whose own name
is exactly the number wins over the job's run: the user named it so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loratui import rundir
from loratui.cli import main
from loratui.commands import agent_view
from tests.test_find_runs import _start_one, home  # noqa: F401  (the fixture)
from tests.test_ls_jobs_80 import JOB, _as_slurm_run


def _runs(home: Path) -> Path:  # noqa: F811
    return home / "proj" / "runs"


def test_every_command_and_the_agent_interface_take_a_job_id(home: Path,  # noqa: F811
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    run_id = _start_one(home, capsys)
    _as_slurm_run(home, run_id)
    assert rundir.resolve(JOB, _runs(home)).run_id == run_id
    assert agent_view.find_run(JOB, _runs(home)).run_id == run_id  # MCP's run_status, advice, summary...
    assert agent_view.status(agent_view.find_run(JOB, _runs(home)))["run"] == run_id
    assert main(["attach", JOB, "--headless"]) == 0
    assert run_id in capsys.readouterr().out
    assert main(["stacks", JOB]) == 1  # found; it has ended, so no trainer to dump
    assert f"{run_id}: no trainer process is running" in capsys.readouterr().out
    assert main(["pause", JOB]) == 2  # found, and told it is not running, by its id
    assert run_id in capsys.readouterr().err
    assert main(["replay", JOB, "--summary"]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == run_id
    assert main(["replay", run_id, JOB, "--summary"]) == 0  # B, the run to compare with
    assert json.loads(capsys.readouterr().out)["b"]["run_id"] == run_id
    assert main(["doctor", JOB]) == 0
    assert run_id in capsys.readouterr().out
    assert main(["report", JOB, "--out", str(home / "report")]) == 0
    assert run_id in (home / "report" / "report.md").read_text()


def test_a_run_named_like_a_job_id_wins_over_the_job(home: Path,  # noqa: F811
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    in_job = _start_one(home, capsys)
    _as_slurm_run(home, in_job)
    assert main(["import", str(home / "proj" / "train.log"), "--name", JOB]) == 0
    named = capsys.readouterr().out.strip().splitlines()[-1]
    assert named.endswith(f"-{JOB}") and named != in_job
    assert rundir.resolve(JOB, _runs(home)).run_id == named
    assert agent_view.find_run(JOB, _runs(home)).run_id == named
    assert main(["replay", JOB, "--summary"]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == named
    assert main(["doctor", JOB]) == 0
    assert named in capsys.readouterr().out
