"""What loratui reads from Slurm, as plain functions: `scontrol -o show job` lines, why a job still
COMPLETING is ending, the memory cgroup's OOM kills, the job's variables."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from loratui import slurm

RUNNING = ("JobId=42 JobName=tiny UserId=me(1000) JobState=RUNNING Reason=None Dependency=(null) Requeue=1 "
           "Restarts=1 BatchFlag=1 ExitCode=0:0 RunTime=00:00:12 TimeLimit=00:30:00 TimeMin=N/A "
           "StartTime=2026-12-04T10:00:00 EndTime=2026-12-04T10:30:00 NodeList=gpu[01-02] BatchHost=gpu01 "
           "NumNodes=2 NumCPUs=4 StdErr=/shared/slurm-42.out")
DONE = "JobId=7 JobName=x JobState=TIMEOUT Reason=TimeLimit ExitCode=0:15 StartTime=Unknown EndTime=None NumNodes=1"


def test_scontrol_lines_become_jobs() -> None:
    jobs = slurm.parse_jobs("\n".join([RUNNING, DONE, "No jobs in the system", "JobId=x JobState=RUNNING", ""]))
    assert set(jobs) == {"42", "7"}
    job = jobs["42"]
    assert (job.state, job.num_nodes, job.node_list, job.restarts, job.batch_host) == ("RUNNING", 2, "gpu[01-02]", 1,
                                                                                         "gpu01")
    end = time.mktime(time.strptime("2026-12-04T10:30:00", "%Y-%m-%dT%H:%M:%S"))
    assert job.end_time == end and job.time_left(end - 90) == 90 and job.time_left(end + 5) == 0
    assert not job.over and jobs["7"].over
    assert jobs["7"].start_time is None and jobs["7"].time_left(0) is None  # not running: no time left
    assert jobs["7"].cause().startswith("Slurm: job 7 TIMEOUT: the job reached its time limit")


@pytest.mark.parametrize(("state", "reason", "stderr", "expected"), [
    ("TIMEOUT", "TimeLimit", "", "TIMEOUT"),  # the job is over: scontrol says it
    ("COMPLETING", "TimeLimit", "", "TIMEOUT"),  # still ending: the reason says it
    ("COMPLETING", "None", "slurmstepd-n1: error: *** JOB 42 ON n1 CANCELLED AT 2026-12-04T13:35:04 ***\n",
     "CANCELLED"),
    ("COMPLETING", "None", "*** JOB 42 ON n1 CANCELLED AT 2026-12-04T13:35:04 DUE TO PREEMPTION ***\n", "PREEMPTED"),
    ("COMPLETING", "None", "*** STEP 42.0 ON n1 CANCELLED AT 2026-12-04T13:35:04 DUE TO NODE FAILURE ***", "NODE_FAIL"),
    ("COMPLETING", "None", "*** JOB 42 ON n1 CANCELLED AT 2026-12-04T13:35:04 DUE TO JOB REQUEUE ***", "REQUEUED"),
    ("COMPLETING", "None", "*** JOB 41 ON n1 CANCELLED AT 2026-12-04T13:35:04 ***\n", ""),  # another job's line
    ("RUNNING", "None", "step 3 loss 0.1\n", ""),  # a signal of the user's own (--signal, kill)
])
def test_why_a_job_is_ending(tmp_path: Path, state: str, reason: str, stderr: str, expected: str) -> None:
    out = tmp_path / "slurm-42.out"
    out.write_text("lots of output\n" * 100 + stderr)
    job = slurm.Job(job_id="42", state=state, reason=reason, std_err=str(out))
    assert slurm.ending(job) == expected


def test_oom_kills_are_read_from_the_memory_cgroups_above_the_process(tmp_path: Path) -> None:
    proc = tmp_path / "cgroup"
    proc.write_text("4:memory:/slurm_n1/uid_0/job_6/step_batch/task_0\n0::/\n")
    memory = tmp_path / "memory"
    for depth, kills in (("slurm_n1/uid_0/job_6/step_batch/task_0", 0), ("slurm_n1/uid_0/job_6/step_batch", 1),
                         ("slurm_n1/uid_0/job_6", 0)):
        (memory / depth).mkdir(parents=True, exist_ok=True)
        (memory / depth / "memory.oom_control").write_text(f"oom_kill_disable 0\nunder_oom 0\noom_kill {kills}\n")
    (memory / "memory.oom_control").write_text("oom_kill 99\n")  # the host's root: other people's kills
    assert slurm.oom_kills(proc, tmp_path) == 1
    v2 = tmp_path / "v2"
    (v2 / "system.slice" / "job").mkdir(parents=True)
    (v2 / "system.slice" / "job" / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\n")
    proc.write_text("0::/system.slice/job\n")
    assert slurm.oom_kills(proc, v2) == 2
    assert slurm.oom_kills(tmp_path / "missing", tmp_path) is None


def test_the_job_environment_is_recorded_only_inside_a_job() -> None:
    assert slurm.job_env({"HOME": "/root", "SLURM_NODEID": "1"}) == {}
    inside = {"SLURM_JOB_ID": "42", "SLURM_NODEID": "1", "SLURMD_NODENAME": "gpu02", "SLURM_JOB_ACCOUNT": "x"}
    assert slurm.job_env(inside) == {"SLURM_JOB_ID": "42", "SLURM_NODEID": "1", "SLURMD_NODENAME": "gpu02"}


@pytest.mark.parametrize(("text", "expected"), [("10m", 600.0), ("90s", 90.0), ("1h30m", 5400.0), ("1.5h", 5400.0),
                                                ("10", None), ("ten minutes", None), ("", None)])
def test_durations_read_as_slurm_users_write_them(text: str, expected: float | None) -> None:
    from loratui.units import seconds

    assert seconds(text) == expected


@pytest.mark.parametrize(("section", "message"), [
    ('save_before_limit = "ten"', "slurm.save_before_limit"),
    ("requeue = true", "requeue = true needs save_before_limit"),
])
def test_a_slurm_section_that_cannot_work_is_refused_at_its_key(tmp_path: Path, section: str, message: str) -> None:
    from loratui.recipe import RecipeError, load_recipe

    recipe = tmp_path / "r.toml"
    recipe.write_text(f'[model]\npath = "loratui:tiny"\n[data]\npath = "d.jsonl"\n[slurm]\n{section}\n')
    with pytest.raises(RecipeError, match=message) as caught:
        load_recipe(recipe)
    assert "r.toml" in str(caught.value)


@pytest.mark.parametrize(("flags", "message"), [
    (["--requeue"], "--requeue: needs --save-before-limit"),
    (["--save-before-limit", "ten"], "--save-before-limit ten: give a duration"),
])
def test_time_limit_flags_that_cannot_work_are_refused_before_anything_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str) -> None:
    from loratui import cli

    runs = tmp_path / "runs"
    assert cli.main(["run", "--runs-dir", str(runs), *flags, "--", "true"]) == 2
    assert message in capsys.readouterr().err
    assert not runs.exists()


@pytest.mark.parametrize(("flags", "said"), [(["--save-before-limit", "10m"], "--save-before-limit"),
                                             (["--save-before-limit", "10m", "--requeue"],
                                              "--save-before-limit and --requeue")])
def test_time_limit_flags_outside_a_job_are_said_to_do_nothing(monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str], flags: list[str],
                                                               said: str) -> None:
    """Trial 14: the README's batch-script line tried by hand (`loratui run --save-before-limit 10m -- ...`) ran
    with the flag silently ignored; inside a job, nothing is said."""
    import argparse

    from loratui.commands.launch_checks import slurm_limit

    args = argparse.Namespace(save_before_limit=flags[1], requeue="--requeue" in flags, watch=["true"], recipe=None)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert slurm_limit(args) == ("10m", "--requeue" in flags)
    assert capsys.readouterr().err == (f"loratui: note: {said}: ignored outside a Slurm job (no SLURM_JOB_ID here): "
                                       "this run has no time limit to save before\n")
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    assert slurm_limit(args) == ("10m", "--requeue" in flags)
    assert capsys.readouterr().err == ""
