"""The scheduler's word is the run's end: real Slurm jobs cancelled, killed by their memory limit, or whose
every process died without a line, recorded with Slurm's cause, explained by doctor, and alerted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, kinds, only_run, wait_for, watched_pids
from tests.slurm_helpers import Jobs, loratui_cli, needs_slurm, wait_state
from tests.slurm_helpers import endpoint, jobs, runs  # noqa: F401  (fixtures, shared by the Slurm tests)
from tests.test_alerts import Endpoint

pytestmark = [pytest.mark.slow, needs_slurm]
SCRIPTS = REPO / "tests" / "data" / "scripts"


def _watched(runs: Path, url: str, *command: str) -> list[str]:
    return [sys.executable, "-m", "loratui", "run", "--headless", "--notify", url, "--runs-dir", str(runs), "--",
            *command]


def _looked_at(runs: Path) -> bool:
    """`loratui ls`, as a user would: the end is written by the supervisor, or, where Slurm killed it first
    (KillWait after its SIGTERM), by whoever looks next."""
    return loratui_cli("ls", "--runs-dir", str(runs)).returncode == 0


def _run_with_steps(runs: Path, n: int = 2) -> Path:
    run: Path = wait_for(lambda: any(p.is_dir() for p in runs.iterdir()) and only_run(runs), timeout=300)  # type: ignore[assignment]
    wait_for(lambda: len(kinds(run, "step")) >= n, timeout=300)
    return run


def _keepers(run: Path) -> list[int]:
    """The watched command's keeper (`supervisor/keeper.py`), which watched_pids leaves out."""
    marker = f"LORATUI_RUN_DIR={run.resolve()}".encode()
    found = []
    for entry in (e for e in os.listdir("/proc") if e.isdigit()):
        try:
            if b"loratui.supervisor.keeper" in Path(f"/proc/{entry}/cmdline").read_bytes() \
                    and marker in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                found.append(int(entry))
        except OSError:
            continue
    return found


def _alerts(endpoint: Endpoint) -> list[dict[str, object]]:
    return [json.loads(r["body"]) for r in endpoint.requests]


def _alerted(endpoint: Endpoint, cause: str) -> dict[str, object]:
    found = wait_for(lambda: [a for a in _alerts(endpoint) if cause in json.dumps(a)], timeout=120)
    return found[0]  # type: ignore[index,no-any-return]


def test_scancel_is_recorded_as_cancelled_explained_and_alerted(runs: Path, jobs: Jobs, endpoint: Endpoint) -> None:
    job = jobs.submit(_watched(runs, endpoint.url, sys.executable, str(SCRIPTS / "plain_loop.py"), "5000"))
    run = _run_with_steps(runs)
    subprocess.run(["scancel", job], check=True, timeout=60)
    (end,) = wait_for(lambda: _looked_at(runs) and kinds(run, "end"), timeout=300, every=2)  # type: ignore[misc]
    assert end["state"] == "stopped" and end["cause"] == "CANCELLED", end
    assert f"Slurm: job {job} CANCELLED" in str(end["error"])
    alert = _alerted(endpoint, "CANCELLED")
    assert alert["event"] == "failed" and "ended by Slurm" in str(alert["title"]), alert
    doctor = loratui_cli("doctor", str(run))
    assert "Slurm ended the job (CANCELLED)" in doctor.stdout and "scancel" in doctor.stdout, doctor.stdout


def test_a_memory_limit_kill_is_recorded_as_out_of_memory(runs: Path, jobs: Jobs, endpoint: Endpoint) -> None:
    if "TaskPlugin=task/cgroup" not in Path("/etc/slurm/slurm.conf").read_text(errors="replace"):
        pytest.skip("this cluster enforces no memory limit (TaskPlugin is not task/cgroup: no writable cgroup v1)")
    job = jobs.submit(_watched(runs, endpoint.url, sys.executable, str(SCRIPTS / "grow_ram.py"), "40"),
                      "--mem=500M")
    run = _run_with_steps(runs)
    (end,) = wait_for(lambda: _looked_at(runs) and kinds(run, "end"), timeout=300, every=2)  # type: ignore[misc]
    assert end["state"] == "failed" and end.get("cause") == "OUT_OF_MEMORY" and end.get("signal") == "SIGKILL", end
    assert "memory cgroup killed the trainer" in str(end["error"])
    assert wait_state(job, "OUT_OF_MEMORY") == "OUT_OF_MEMORY"  # Slurm's own verdict agrees
    _alerted(endpoint, "OUT_OF_MEMORY")
    doctor = loratui_cli("doctor", str(run))
    assert "Slurm ended the job (OUT_OF_MEMORY)" in doctor.stdout and "--mem" in doctor.stdout, doctor.stdout


def test_a_job_whose_processes_all_died_silently_gets_slurm_s_word_from_whoever_looks(
        runs: Path, jobs: Jobs, endpoint: Endpoint) -> None:
    # The batch script outlives loratui (it sleeps after it), as a script that does more after training would.
    command = _watched(runs, endpoint.url, sys.executable, str(SCRIPTS / "plain_loop.py"), "5000")
    job = jobs.submit(["bash", "-c", f"{' '.join(command)}; sleep 600"])
    run = _run_with_steps(runs)
    # Every writer of the run dies at once without a word (as on a node that loses power): the command's keeper
    # first, which would otherwise see the command and the supervisor die and write the end itself.
    writers = _keepers(run) + watched_pids(run) + [int((run / "supervisor.pid").read_text().split()[0])]
    for pid in writers:
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: json.loads(loratui_cli("ls", "--json", "--runs-dir", str(runs)).stdout)[0]["state"] == "lost",
             timeout=120)
    assert not kinds(run, "end")
    subprocess.run(["scancel", job], check=True, timeout=60)
    wait_state(job, "CANCELLED")
    listed = wait_for(lambda: (r := json.loads(loratui_cli("ls", "--json", "--runs-dir", str(runs)).stdout))
                      and r[0]["state"] == "stopped" and r, timeout=120)
    assert listed[0]["slurm"]["state"] == "CANCELLED", listed  # type: ignore[index]
    (end,) = kinds(run, "end")  # once, however many looked
    loratui_cli("ls", "--runs-dir", str(runs))
    assert len(kinds(run, "end")) == 1 and end["cause"] == "CANCELLED"
    _alerted(endpoint, "CANCELLED")  # sent for the dead supervisor
