"""Why the scheduler ended a run, as the supervisor learns it inside a Slurm job.

Slurm signals every process of a job it ends (time limit, scancel, preemption, a failed node) and shows the
job COMPLETING until they are gone, so the final state is not there to read yet: when the signal comes the
supervisor asks, for a few seconds beside its stop, for the reason and the line slurmstepd writes to the
job's stderr (`slurm.ending`). A memory limit acts through the job's memory cgroup instead, with a bare
SIGKILL to the trainer: its `oom_kill` count, read at start and at the end, tells that kill from others.
"""

from __future__ import annotations

import dataclasses
import signal
import threading
import time

from loratui import slurm

ASK_S = 8.0
JOIN_S = 6.0
"""How long the end waits for Slurm's answer: Slurm SIGKILLs what is left KillWait (30 s by default) after
its SIGTERM, and the End must be written before that."""


class SchedulerWord:
    """Slurm's cause of a run's end, for the End event ("" outside Slurm or when it did not end it)."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self._oom_base = slurm.oom_kills() if job_id else None
        self._look: threading.Thread | None = None
        self._said: slurm.Job | None = None

    def signalled(self) -> None:
        """A SIGTERM came: start asking Slurm why (once)."""
        if self.job_id and self._look is None:
            self._look = threading.Thread(target=self._ask, daemon=True)
            self._look.start()

    def _ask(self) -> None:
        deadline = time.monotonic() + ASK_S
        while time.monotonic() < deadline:
            job = slurm.job(self.job_id, fresh=True)
            cause = slurm.ending(job) if job is not None else ""
            if job is not None and cause:
                self._said = dataclasses.replace(job, state=cause)
                return
            time.sleep(0.5)

    def cause(self, code: int | None) -> tuple[str, str]:
        """(Slurm's job state, what it did) when the scheduler ended the trainer that exited with `code`."""
        if self._look is not None:
            self._look.join(timeout=JOIN_S)
            job = self._said
            if job is not None and job.state == "REQUEUED":
                return "REQUEUED", (f"Slurm requeued job {self.job_id} (an administrator, or a preemption in "
                                    "requeue mode)")
            if job is not None and job.state in slurm.SCHEDULER_ENDS and job.state != "FAILED":
                return job.state, job.cause()
        kills = slurm.oom_kills() if self._oom_base is not None else None
        if code in (-signal.SIGKILL, 128 + signal.SIGKILL) and kills is not None and kills > (self._oom_base or 0):
            return "OUT_OF_MEMORY", (f"Slurm: job {self.job_id} OUT_OF_MEMORY: "
                                     f"{slurm.SCHEDULER_ENDS['OUT_OF_MEMORY'][1]}; the job's memory cgroup "
                                     f"killed the trainer (its oom_kill count went from {self._oom_base} to {kills}); "
                                     "ask for more with --mem")
        return "", ""
