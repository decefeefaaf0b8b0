"""The Slurm job a run belongs to, as Slurm itself says.

A run started inside a job records the job's environment in its header (`job_env`). Whoever looks later
(`ls`, attach, doctor, the supervisor) asks Slurm where the job stands with one `scontrol -o show job`
(every job slurmctld still knows, finished ones for MinJobAge seconds), under a timeout and cached for a
few seconds in the user's state directory, so a login node's `watch loratui ls` costs slurmctld one call
per TTL whatever the number of runs. No Slurm (no `scontrol`, no answer) is an empty answer, never an error.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loratui.userstate import state_dir

JOB_ENV = ("SLURM_JOB_ID", "SLURM_JOB_NAME", "SLURM_JOB_NODELIST", "SLURM_JOB_NUM_NODES", "SLURM_NODEID",
           "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURMD_NODENAME", "SLURM_CLUSTER_NAME",
           "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_RESTART_COUNT", "SLURM_SUBMIT_DIR",
           "SLURM_JOB_PARTITION")
"""What a run records of its job (no secrets among them)."""
QUERY_TIMEOUT_S = 10.0
CACHE_TTL_S = 5.0
LIVE_STATES = frozenset({"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD",
                         "REQUEUE_FED", "RESIZING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT"})
"""Job states after which the job is not over (it runs, waits, or will run again)."""

SCHEDULER_ENDS: dict[str, tuple[str, str]] = {
    # Slurm's JobState -> (the run's final state, what happened, for the user)
    "TIMEOUT": ("failed", "the job reached its time limit and Slurm killed it"),
    "CANCELLED": ("stopped", "the job was cancelled (scancel, or an administrator)"),
    "OUT_OF_MEMORY": ("failed", "the job went over its memory limit and was killed by Slurm (the kernel's "
                                "OOM killer or the memory cgroup: no Python traceback shows it)"),
    "PREEMPTED": ("failed", "the job was preempted by a higher-priority job"),
    "NODE_FAIL": ("failed", "a node of the job failed (its processes died without a word)"),
    "BOOT_FAIL": ("failed", "a node of the job failed to boot"),
    "DEADLINE": ("failed", "the job reached its deadline"),
    "FAILED": ("failed", "the job's batch script exited non-zero"),
}


@dataclass(frozen=True)
class Job:
    """One job as `scontrol show job` describes it (times are epoch seconds; None when Slurm says none)."""

    job_id: str
    state: str
    reason: str = ""
    num_nodes: int = 0
    node_list: str = ""
    start_time: float | None = None
    end_time: float | None = None
    time_limit: str = ""
    restarts: int = 0
    exit_code: str = ""
    batch_host: str = ""
    std_err: str = ""

    def time_left(self, now: float) -> float | None:
        """Seconds until Slurm ends a running job (its EndTime); None when it is not running."""
        if self.state != "RUNNING" or self.end_time is None:
            return None
        return max(0.0, self.end_time - now)

    @property
    def over(self) -> bool:
        return self.state not in LIVE_STATES

    def cause(self) -> str:
        """What Slurm did, in one line: 'Slurm: job 12 TIMEOUT (the job reached its time limit...)'."""
        what = SCHEDULER_ENDS.get(self.state, ("", f"Slurm says {self.state}"))[1]
        reason = f"; reason {self.reason}" if self.reason not in ("", "None") else ""
        code = f"; exit code {self.exit_code}" if self.exit_code not in ("", "0:0") else ""
        return f"Slurm: job {self.job_id} {self.state}: {what}{reason}{code}"


KILLED = re.compile(rb"\*\*\* (?:JOB|STEP) (\d+)\S* ON \S+ CANCELLED AT \S+(?: DUE TO ([A-Z ]+?))? \*\*\*")
DUE_TO = {b"TIME LIMIT": "TIMEOUT", b"PREEMPTION": "PREEMPTED", b"NODE FAILURE": "NODE_FAIL",
          b"JOB REQUEUE": "REQUEUED"}
"""REQUEUED is no end: the job runs again (scontrol requeue, or preemption in requeue mode)."""


def said_end(line: str) -> tuple[str, str] | None:
    """(Slurm's end, the job id) of slurmstepd's `*** JOB 12 ON node1 CANCELLED AT ... DUE TO TIME LIMIT ***` in a
    job's output, None for any other line, and for a requeue (no end: the job runs again)."""
    if "CANCELLED AT" not in line:
        return None
    said = KILLED.search(line.encode("utf-8", "replace"))
    cause = DUE_TO.get(said.group(2) or b"", "CANCELLED") if said else ""
    return (cause, said.group(1).decode()) if said and cause in SCHEDULER_ENDS else None


def ended_event(cause: str, job: str, t: float, step: int) -> Any:
    """The run's End for what slurmstepd said, as a live run records it (supervisor/owner.py)."""
    from loratui import events

    state, what = SCHEDULER_ENDS[cause]
    return events.End(t=t, state=state, step=step, cause=cause, error=f"Slurm: job {job} {cause}: {what}")


def ending(job: Job, tail_bytes: int = 64 << 10) -> str:
    """Why Slurm is ending a job that it still shows COMPLETING (its processes got SIGTERM and live on):
    'TIMEOUT', 'CANCELLED', 'PREEMPTED', 'NODE_FAIL', or '' when it does not say. scontrol keeps the final
    state until the job's processes are gone; the reason (TimeLimit) and the line slurmstepd writes to the
    job's stderr ('*** JOB 12 ON node1 CANCELLED AT ... DUE TO PREEMPTION ***') say it before."""
    if job.state in SCHEDULER_ENDS:
        return job.state
    if job.reason == "TimeLimit":
        return "TIMEOUT"
    try:
        with open(job.std_err, "rb") as handle:
            handle.seek(max(0, os.fstat(handle.fileno()).st_size - tail_bytes))
            said = [m for m in KILLED.finditer(handle.read()) if m.group(1).decode() == job.job_id]
    except OSError:
        return ""
    if not said:
        return ""
    return DUE_TO.get(said[-1].group(2) or b"", "CANCELLED")


def job_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The job's variables present in `environ` (empty outside Slurm)."""
    env = os.environ if environ is None else environ
    return {key: env[key] for key in JOB_ENV if key in env} if "SLURM_JOB_ID" in env else {}


_FIELD = re.compile(r"(?:^|\s)([A-Za-z][\w:/]*)=(\S*)")


def parse_jobs(text: str) -> dict[str, Job]:
    """`scontrol -o show job` output (one job a line) as jobs by id; lines it cannot read are skipped."""
    found: dict[str, Job] = {}
    for line in text.splitlines():
        fields = dict(_FIELD.findall(line))
        job_id = fields.get("JobId", "")
        if not job_id.isdigit() or "JobState" not in fields:
            continue
        found[job_id] = Job(
            job_id=job_id, state=fields["JobState"], reason=fields.get("Reason", ""),
            num_nodes=_int(fields.get("NumNodes", "")), node_list=fields.get("NodeList", ""),
            start_time=_time(fields.get("StartTime", "")), end_time=_time(fields.get("EndTime", "")),
            time_limit=fields.get("TimeLimit", ""), restarts=_int(fields.get("Restarts", "")),
            exit_code=fields.get("ExitCode", ""), batch_host=fields.get("BatchHost", ""),
            std_err=fields.get("StdErr", ""))
    return found


def _int(text: str) -> int:
    head = text.split("-")[0]
    return int(head) if head.isdigit() else 0


def _time(text: str) -> float | None:
    """Slurm's local 'YYYY-MM-DDTHH:MM:SS' as epoch seconds; None for Unknown/None/N/A."""
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def available() -> bool:
    """Whether this host has Slurm's client commands."""
    return shutil.which("scontrol") is not None


def jobs(fresh: bool = False) -> dict[str, Job]:
    """Every job slurmctld knows now (cached `CACHE_TTL_S`); empty without Slurm or when it does not answer."""
    cache = state_dir() / "slurm-jobs.txt"
    if not fresh:
        try:
            if time.time() - cache.stat().st_mtime < CACHE_TTL_S:
                return parse_jobs(cache.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            pass
    text = _scontrol()
    if text is not None:
        _save(cache, text)
    return parse_jobs(text or "")


def job(job_id: str, fresh: bool = False) -> Job | None:
    """One job, or None when Slurm does not know it (any more) or cannot be asked."""
    return jobs(fresh).get(job_id) if job_id else None


def _scontrol() -> str | None:
    if not available():
        return None
    try:
        result = subprocess.run(["scontrol", "-o", "show", "job"], capture_output=True, text=True,
                                timeout=QUERY_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    # "No jobs in the system" is an answer; a refused connection is not.
    return result.stdout if result.returncode == 0 else None


def _save(cache: Path, text: str) -> None:
    from loratui.rundir import replace_file

    try:
        cache.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        replace_file(cache, text.encode(), 0o600)
    except OSError:
        pass  # a read-only home: every look asks Slurm


def oom_kills(proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """How many processes the memory cgroups around this one killed for going over their limit (the most any
    of them counted, from this process's cgroup up): Slurm's memory limit acts through them, and a process
    killed so gets a bare SIGKILL with no Python traceback. None where no memory cgroup can be read."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    counts = []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if "memory" in controllers.split(","):  # cgroup v1
            base, name, field = root / "memory", "memory.oom_control", "oom_kill"
        elif controllers == "" and not any(":memory:" in other for other in lines):  # cgroup v2
            base, name, field = root, "memory.events", "oom_kill"
        else:
            continue
        folder = base / path.strip("/")
        while folder != base:  # the root's counter is the whole host's
            counts.append(_counter(folder / name, field))
            folder = folder.parent
    found = [c for c in counts if c is not None]
    return max(found) if found else None


def _counter(path: Path, field: str) -> int | None:
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == field and value.strip().isdigit():
                return int(value)
    except OSError:
        pass
    return None
