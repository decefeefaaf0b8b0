"""The Slurm job's time limit as a known event: the ETA against the job's end, and a checkpoint before it.

Inside a job the supervisor asks Slurm for the job's EndTime (it moves when an administrator extends the
limit) every `REFRESH_S`. When the run's pace says it will not finish by then it warns once (a Notice the
screen shows and the alerts send). `save_before_limit` before the end it saves a checkpoint; with
`requeue` it suspends instead (checkpoint, exit) and `scontrol requeue`s the job, whose next start resumes
the same run from that checkpoint (cli.py finds it by the job id).
"""

from __future__ import annotations

import subprocess
import threading
import time
from typing import Any

from loratui import events, slurm
from loratui.logic import fmt
from loratui.units import seconds

CHECK_S = 2.0
REFRESH_S = 30.0
MIN_STEPS = 3
"""Steps the pace is measured over before the ETA is compared with the job's end."""


class TimeLimit:
    """Watches one job's end for one supervisor (`owner`: state, status, log, _handle)."""

    def __init__(self, owner: Any, job_id: str, save_before_limit: str, requeue: bool) -> None:
        self.owner = owner
        self.job_id = job_id
        self.save_before_s = seconds(save_before_limit) if save_before_limit else None
        self.save_before = save_before_limit
        self.requeue = requeue and self.save_before_s is not None
        self.saved = self.warned = False
        self.requeue_pending = False
        """A suspend for the requeue was asked: the trainer's exit 75 means requeue, not wait for resume."""
        self._end: float | None = None
        self._asked = 0.0
        self._pace: tuple[float, int] | None = None

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(CHECK_S):
            try:
                self.tick(time.time())
            except Exception as exc:  # never take the supervisor down for a look at the clock
                self._notice("info", f"the Slurm time-limit check stopped: {type(exc).__name__}: {exc}")
                return

    def tick(self, now: float) -> None:
        if now - self._asked >= REFRESH_S:
            self._asked = now
            job = slurm.job(self.job_id, fresh=True)
            self._end = job.end_time if job is not None and job.state == "RUNNING" else self._end
        if self._end is None or self.owner.status.state != events.TRAINING:
            return
        left = self._end - now
        self._check_pace(now, left)
        if self.save_before_s is not None and not self.saved and left <= self.save_before_s:
            self.saved = True
            self._save(left)

    def _check_pace(self, now: float, left: float) -> None:
        status = self.owner.status
        if self.warned or not status.max_steps:
            return
        if self._pace is None:
            self._pace = (now, status.step)
            return
        t0, step0 = self._pace
        if status.step - step0 < MIN_STEPS or now <= t0:
            return
        eta = (status.max_steps - status.step) * (now - t0) / (status.step - step0)
        if eta > left:
            self.warned = True
            plan = (f"; a checkpoint is saved {self.save_before} before it" + (" and the job requeued" if self.requeue
                                                                                else "")
                    if self.save_before_s is not None else "; set [slurm] save_before_limit (or --save-before-limit) "
                    "to save a checkpoint before it")
            self._notice("warning", f"the run will not finish before the time limit: at this pace it needs "
                         f"{fmt.duration(eta)} more (step {status.step}/{status.max_steps}), and Slurm ends job "
                         f"{self.job_id} in {fmt.duration(left)} (at {time.strftime('%H:%M:%S', time.localtime(self._end))})"
                         f"{plan}", key="time_limit")

    def _save(self, left: float) -> None:
        command = "suspend" if self.requeue else "save"
        self.requeue_pending = self.requeue
        self.owner.unattended.watch.requeue_job = self.job_id if self.requeue else ""  # what its alert says
        from loratui.supervisor import control

        refused = self.owner._handle(control.Request(command, "slurm"))
        what = "checkpoint, then requeue the job" if self.requeue else "checkpoint"
        if refused:
            self.requeue_pending = False
            self.owner.unattended.watch.requeue_job = ""
            self._notice("error", f"job {self.job_id} ends in {fmt.duration(left)}: could not {command} before the "
                         f"limit ({refused})", key="time_limit")
        else:
            self._notice("info", f"job {self.job_id} ends in {fmt.duration(left)}: {what} "
                         f"({self.save_before} before the limit)")

    def requeue_job(self) -> str:
        """`scontrol requeue JOB`: '' when Slurm took it, else why not."""
        try:
            result = subprocess.run(["scontrol", "requeue", self.job_id], capture_output=True, text=True,
                                    timeout=slurm.QUERY_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError) as exc:
            return str(exc)
        return "" if result.returncode == 0 else (result.stderr.strip() or f"exit code {result.returncode}")

    def _notice(self, level: str, message: str, key: str = "slurm") -> None:
        self.owner.log.write(events.Notice(t=time.time(), level=level, message=message, key=key))
