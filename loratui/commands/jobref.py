"""A Slurm job id where a run's name goes (`loratui replay 4242`, `doctor 4242`, `report 4242`): the README says a
job id works wherever a run name does; only the commands that act on a live run (cli.pick_run) knew it."""

from __future__ import annotations

from pathlib import Path

from loratui import rundir, runstatus


def by_job_id(name: str, runs_dir: Path, everywhere: bool = False) -> rundir.RunDir | None:
    """The run started in Slurm job `name` (`loratui attach 4242`); the newest when a job made several."""
    if not name.isdigit():
        return None
    found = [run for run in rundir.list_runs(runs_dir, everywhere) if runstatus.read(run).job_id == name]
    return found[-1] if found else None


def named(target: str, runs_dir: Path | None, everywhere: bool = False) -> str:
    """`target`, or the directory of the run Slurm job `target` started (an existing path stays itself)."""
    if runs_dir is None or Path(target).exists():
        return target
    run = by_job_id(target, runs_dir, everywhere)
    return str(run.path) if run is not None else target
