"""Real Slurm jobs for the tests: the one-node cluster tests/slurm/start_cluster.sh starts (.ci/run runs it).

Tests that need it skip with the reason where `sbatch` is missing or the cluster does not answer.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, wait_for, write_run


def job_env(**extra: str) -> dict[str, str]:
    """The test's environment as it is now (the session's cache and state directories), for jobs and CLIs."""
    return dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(REPO), **extra)


def cluster_reason() -> str:
    """Why no Slurm job can run here ('' when one can)."""
    if shutil.which("sbatch") is None:
        return "no Slurm here (sbatch is missing; .ci/run installs slurm-wlm and starts tests/slurm/start_cluster.sh)"
    try:
        states = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"sinfo did not answer ({exc})"
    if not any(s in states for s in ("idle", "mixed", "alloc")):
        return f"the Slurm node is not up (sinfo: {states.strip() or 'nothing'}); run tests/slurm/start_cluster.sh"
    return ""


needs_slurm = pytest.mark.skipif(bool(cluster_reason()), reason=cluster_reason() or "Slurm is up")


class Jobs:
    """Submits jobs and cancels every one of them at the end (finally)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.ids: list[str] = []

    def submit(self, command: list[str], *options: str, env: dict[str, str] | None = None) -> str:
        """`sbatch --parsable OPTIONS --wrap COMMAND`; the job id."""
        result = subprocess.run(["sbatch", "--parsable", "-o", str(self.folder / "slurm-%j.out"),
                                 "--chdir", str(REPO), *options, "--wrap", shlex.join(command)],
                                capture_output=True, text=True, timeout=60, env=env or job_env())
        assert result.returncode == 0, result.stderr
        job_id = result.stdout.strip().split(";")[0]
        self.ids.append(job_id)
        return job_id

    def output(self, job_id: str) -> str:
        try:
            return (self.folder / f"slurm-{job_id}.out").read_text(errors="replace")
        except OSError:
            return ""

    def cancel_all(self) -> None:
        if self.ids:
            subprocess.run(["scancel", *self.ids], capture_output=True, timeout=60)


def job_state(job_id: str) -> str:
    """JobState as scontrol says now ('' when it cannot say)."""
    result = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True, timeout=30)
    for field in result.stdout.split():
        if field.startswith("JobState="):
            return field.split("=", 1)[1]
    return ""


def wait_state(job_id: str, *states: str, timeout: float = 300) -> str:
    return str(wait_for(lambda: (s := job_state(job_id)) in states and s, timeout=timeout, every=0.5))


def waiting_job_run(runs: Path, jobs: Jobs, name: str, *after: Any) -> tuple[str, Path]:
    """A held job (pending, as a requeued job waits for its next start) and a run it recorded: its header, a
    training state, then `after`'s events (a checkpoint, a suspend) and no end, as a requeue leaves it."""
    from loratui import events

    job_id = jobs.submit(["true"], "--hold")
    wait_state(job_id, "PENDING")
    path = runs / name
    write_run(path, [events.Header(t=1.0, schema=1, run_id=path.name, recipe_hash="h", name=name.split("-")[-1],
                                slurm={"SLURM_JOB_ID": job_id, "SLURM_JOB_NUM_NODES": "1"}, node="vm"),
                  events.State(t=2.0, state=events.TRAINING, step=0),
                  *(event(job_id, path) if callable(event) else event for event in after)])
    return job_id, path


def loratui_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loratui", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=env or job_env())


def short_dir(prefix: str) -> Iterator[Path]:
    """A runs directory with a short path (a control socket's path has at most 107 bytes)."""
    runs = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    yield runs
    shutil.rmtree(runs, ignore_errors=True)


# The fixtures every Slurm test file uses, one copy (a test module imports the ones it takes by name); the
# tiny model copied to a directory of its own is the watched runs' fixture.
from tests.test_watch_runs import model_dir  # noqa: E402, F401


@pytest.fixture
def runs() -> Iterator[Path]:
    yield from short_dir("sl-")


@pytest.fixture
def jobs(runs: Path) -> Iterator[Jobs]:
    """The jobs a test submits, cancelled whatever the test's outcome."""
    submitted = Jobs(runs)
    try:
        yield submitted
    finally:
        submitted.cancel_all()


@pytest.fixture
def endpoint() -> Iterator[Any]:
    """A local HTTP endpoint that records the alerts it gets."""
    from tests.test_alerts import Endpoint

    server = Endpoint()
    yield server
    server.server.shutdown()
