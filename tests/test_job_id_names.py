"""Trial 7 on a Slurm cluster: `loratui attach 165` found the job's run, but once it had ended `loratui replay 165
--summary`, `doctor 165` and `report 165` said "no run named '165'", where the README says a job id works
wherever a run name does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loratui.cli import main
from tests.test_find_runs import _start_one, home  # noqa: F401  (the fixture)
from tests.test_ls_jobs_80 import JOB, _as_slurm_run


def test_a_job_id_names_its_run_for_replay_doctor_and_report(home: Path,  # noqa: F811
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    run_id = _start_one(home, capsys)
    _as_slurm_run(home, run_id)
    assert main(["replay", JOB, "--summary"]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == run_id
    assert main(["doctor", JOB]) == 0
    assert run_id in capsys.readouterr().out
    assert main(["report", JOB, "--out", str(home / "report")]) == 0
    assert (home / "report" / "report.md").read_text().count(run_id) >= 1
    assert main(["replay", JOB, JOB, "--summary"]) == 0  # B, the run to compare with, by its job id too
    capsys.readouterr()
    assert main(["doctor", "123456789012"]) == 2  # a number no job of these runs has is still "no run named"
    assert "no run named '123456789012'" in capsys.readouterr().err
