"""The supervisor: the detached owner of one run.

Started by `loratui run` in a session of its own (so a closed terminal or a dropped SSH link does not
reach it), it spawns the trainer, samples the GPU, serves the control socket, captures the trainer's
output, and records the trainer's end. Run as `python -m loratui.supervisor RUN_DIR`.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from loratui import __version__, events, nodelogs, runstatus, slurm
from loratui.eventlog import EventWriter, LogTail
from loratui.logic import command_keys
from loratui.outputtail import follow_streams
from loratui.recipe import Recipe, RecipeError, recipe_hash
from loratui.rundir import (
    STOPPED_CODES,
    SUSPEND_EXIT,
    RunDir,
    checkpoint_step,
    file_size,
    latest_checkpoint,
    node_name,
    write_pidfile,
)
from loratui.safeio import append_file
from loratui.supervisor import command as watched
from loratui.supervisor import control, inherited_fds
from loratui.supervisor.gpu import GpuProbe, open_probe
from loratui.supervisor.sampler import Sampler
from loratui.supervisor.scheduler import SchedulerWord
from loratui.supervisor.time_limit import TimeLimit
from loratui.supervisor.unattended import Unattended
from loratui.supervisor.watch_output import OutputWatcher
from loratui.units import to_gib

STOP_GRACE_S = 60.0
"""How long a stopping trainer may take to reach a step boundary before it is terminated."""
INDEXER_WAIT_S = 60.0
"""How long the supervisor waits, after the end event, for the indexer to save the log's whole index."""


class Supervisor:
    """Owns the trainer process and the run's log for the run's whole life."""

    def __init__(self, run: RunDir, probe: GpuProbe | None = None, probe_reason: str = "",
                 adopt: bool = False, kept_env: bool = False, fds: tuple[int, ...] = ()) -> None:
        """`kept_env`: a restart with applied advice started this run and kept the replaced run's first environment
        as this one's (`RunDir.first_env`): the trainer starts in it, not in the viewer's this process inherited.
        `fds`: the descriptors beyond 0-2 `loratui run` inherited, for a watched command's first launch."""
        self.run = run
        self.passed_fds = fds
        self.adopt = adopt
        """Taking over a suspended run whose supervisor died: resume from its last checkpoint."""
        self.log = EventWriter(run.events)
        self.settings = run.read_settings()
        recipe, why = run.load_recipe()
        if recipe is None:  # `loratui run` checked it: only a copy edited since then gets here
            raise RecipeError(why)
        self.recipe = recipe
        self.probe, self.probe_reason = probe, probe_reason
        self.trainer: subprocess.Popen[bytes] | None = None
        self.state = events.STARTING
        self.stop_requested = False
        self.stop_signalled = False
        """The stop reached the running trainer as a signal of ours (a watched command's SIGTERM, or the escalation
        after the grace): its exit code is then the signal's doing, not a failure. torchrun's agent exits 1 after it
        terminated its ranks on SIGTERM (its SignalException), and the stopped run was recorded failed."""
        self._stop_signal_lock = threading.Lock()  # held while a stop's signal is sent and recorded
        self._resume = threading.Event()
        self._stderr_tail: list[str] = []
        self._pids_cache: tuple[float, list[int]] = (0.0, [])
        self._control_lock = threading.Lock()
        self._cmds_offset = file_size(run.commands)
        self.status = runstatus.Status()
        self._status_tail = LogTail(run.events)
        self._status_lock = threading.Lock()
        self.unattended = Unattended(self)  # alerts, hang detection, the opt-in guard
        # A watched command (`loratui run -- COMMAND`): its output is read for steps until a hooked Trainer
        # reports them itself, and it is paused by signal when it has no Trainer.
        self.command = list(self.settings.command)
        # The environment the trainer is started in: the user's at the run's first start, also when a new supervisor
        # re-adopts it from another shell (`loratui resume`: that shell's variables are not the run's).
        self.user_env, self._env_note = trainer_base_env(run, adopt or kept_env)
        self.watcher = OutputWatcher() if self.command else None
        # The reader keeps state across lines (a dict on stdout waits for the bar's redraw on stderr): the tail thread
        # feeds it, and the end's `close` (after a join that may time out) must not run beside a feed.
        self._watch_lock = threading.Lock()
        self.suspend_requested = False
        # Inside a Slurm job: the scheduler may end the run (time limit, scancel, memory limit, preemption).
        self.slurm_job = slurm.job_env().get("SLURM_JOB_ID", "")
        self.scheduler = SchedulerWord(self.slurm_job)
        limit = self.settings.save_before_limit or self.recipe.slurm.save_before_limit
        self.time_limit = TimeLimit(self, self.slurm_job, limit, self.settings.requeue or self.recipe.slurm.requeue) \
            if self.slurm_job else None
        self.requeueing = False
        if adopt:  # the run's history, to the log's end: folded for its state and advice, its alerts not sent again
            self._fold_history()

    def _fold_history(self) -> None:
        """Fold the adopted run's whole log quietly, `HISTORY_READ` bytes at a time (memory stays bounded). One read
        of 64 MiB was taken for the history and the rest of a longer log was folded by the status thread as news:
        its old alerts (a NaN, the suspend) were recorded and sent again at every resume."""
        while True:
            start = self._status_tail.offset
            history = self._status_tail.poll(HISTORY_READ)
            if history:
                self.unattended.watch.feed_quietly(history)
                runstatus.fold(self.status, history)
            if self._status_tail.offset == start:  # the log's end
                break
        self.status.offset = self._status_tail.whole

    # -- life cycle -------------------------------------------------------------------------------

    def main(self) -> int:
        """Run to the end; the exit code mirrors the run's outcome."""
        write_pidfile(self.run.pidfile)
        server = control.listen(self.run.control)
        threading.Thread(target=control.serve, args=(server, self._handle), daemon=True).start()
        stop_inbox = threading.Event()  # requests from other hosts (a login node) come as files
        threading.Thread(target=control.serve_inbox, args=(self.run, self._handle, stop_inbox), daemon=True).start()
        self._write_header()
        if self._env_note:
            self.log.write(events.Notice(t=time.time(), level="warning", key="environment", message=self._env_note))
        self.unattended.announce()
        indexer = start_indexer(self.run)
        sampler = self._start_sampler()
        stop_status = threading.Event()
        threading.Thread(target=self._keep_status, args=(stop_status,), daemon=True).start()
        if self.time_limit is not None:
            threading.Thread(target=self.time_limit.run, args=(stop_status,), daemon=True).start()
        try:
            final = self._drive()  # (the kept environment stays after the end, as the alert URL does: a restart takes it)
        finally:
            stop_status.set()
            stop_inbox.set()
            if sampler is not None:
                sampler.stop()
            server.close()
            self._update_status()
            self.unattended.close()
            for path in (self.run.control, self.run.pidfile):
                path.unlink(missing_ok=True)
            self.log.close()
            finish_indexer(indexer)
        return 0 if final == events.FINISHED else 1

    def _drive(self) -> str:
        """Spawn the trainer, and again after each suspend/resume, until the run ends."""
        resume_from = self.settings.resume_from
        if self.adopt:
            last = (watched.last_checkpoint(self.run) if self.command
                    else latest_checkpoint(self.run.checkpoints))
            resume_from = last or resume_from
            restart = slurm.job_env().get("SLURM_RESTART_COUNT", "")
            who = f"Slurm job {self.slurm_job} restarted (restart {restart})" if self.slurm_job and restart \
                else "re-adopted by a new supervisor"
            self._set_state(events.STARTING, f"{who}; resuming from {resume_from}")
        while True:
            code = self._run_trainer(resume_from)
            self._update_status()  # the trainer's last output is in the log: the guard reads it
            again, resume = self.unattended.after_exit(code)
            if again:
                resume_from = resume
                # The new attempt's step (the checkpoint's), which the views show until its first step, not the
                # step the failed life reached (the headless line printed `step 12/12` for a restart from step 8).
                self._set_state(events.STARTING, f"guard: restarting from {resume or 'the start'}",
                                step=checkpoint_step(resume))
                continue
            suspended = self.suspend_requested or not self.command  # a command may exit 75 of its own
            if code == SUSPEND_EXIT and not self.stop_requested and suspended and self._requeue():
                return events.SUSPENDED  # no end: the requeued job goes on with this run
            if code == SUSPEND_EXIT and not self.stop_requested and suspended:
                self.suspend_requested = False
                self._set_state(events.SUSPENDED, watched.suspend_reason(self.probe is not None))
                self._resume.wait()
                self._resume.clear()
                if self.stop_requested:
                    return self._end(events.STOPPED, code)
                resume_from = (watched.last_checkpoint(self.run) if self.command
                               else latest_checkpoint(self.run.checkpoints))
                self._set_state(events.STARTING, f"resuming from {resume_from}")
                continue
            if code == 0 and self.unattended.halted:  # stopped by the guard for a bad loss, not restarted
                return self._end(events.FAILED, code, self.unattended.halted)
            if code == 0 or self._stop_explains(code):
                return self._end(events.STOPPED if self.stop_requested else events.FINISHED, code)
            return self._end(events.FAILED, code)

    def _stop_explains(self, code: int) -> bool:
        """Whether the stop asked explains the trainer's exit `code`: one a stop ends with, or any code once the stop
        reached the running trainer as our signal (torchrun's 1). A trainer that had crashed before it was signalled
        (or that a command file's stop let exit on its own) keeps its code's meaning: failed."""
        with self._stop_signal_lock:  # a signal sent as the trainer exited is recorded before it is read
            return self.stop_requested and (code in STOPPED_CODES or self.stop_signalled)

    def _write_header(self) -> None:
        if self.run.events.stat().st_size > 0:
            return  # a restarted supervisor appends to the log it already has
        text = self.run.recipe.read_text(encoding="utf-8")
        self.log.write(events.Header(
            t=time.time(), schema=events.SCHEMA_VERSION, run_id=self.run.run_id,
            recipe_hash=recipe_hash(text), recipe_path=self.settings.recipe_source,
            name=self.settings.name, created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            loratui_version=__version__, argv=sys.argv, warn_gb=self.recipe.monitor.warn_gb,
            gpu_totals=[d.total for d in self.probe.devices()] if self.probe is not None else [],
            command=self.command, cwd=self.settings.cwd if self.command else "",
            env=command_keys.env_summary(dict(self.user_env)) if self.command else {},
            controls=["stop"] if self.command else [],  # until its Trainer (or first step) says more
            slurm=slurm.job_env(), node=node_name(),
            clock_offset=nodelogs.clock_offset(self.run.path) if self.slurm_job else 0.0,
        ))
        self._set_state(events.STARTING, "supervisor started")

    def _start_sampler(self) -> Sampler | None:
        if self.probe is None:
            self.log.write(events.GpuInfo(t=time.time(), available=False, reason=self.probe_reason))
            return None
        devices = self.probe.devices()
        self.log.write(events.GpuInfo(
            t=time.time(), available=True, names=[d.name for d in devices],
            totals=[d.total for d in devices], indices=[d.index for d in devices]))
        sampler = Sampler(self.probe, self.log.write, sample_hz=self.recipe.monitor.sample_hz,
                          record_hz=self.recipe.monitor.record_hz, run_pids=self._run_pids)
        sampler.start()
        return sampler

    def _keep_status(self, stop: threading.Event) -> None:
        """Keep `status.json` current about once a second (what `ls` and the views read)."""
        while not stop.wait(1.0):
            self._update_status()

    def _update_status(self) -> None:
        """Fold what the log gained since the last call (the tail reads only new bytes) and save it."""
        with self._status_lock:  # the status thread and the driving thread both call this
            self._fold_status()

    def _fold_status(self) -> None:
        found = self._status_tail.poll()
        self.unattended.on_events(found)
        if not found and self.run.status_file.exists():
            try:  # a heartbeat for viewers on other hosts, where this pid cannot be looked up
                os.utime(self.run.status_file)
            except OSError:
                pass
            return
        runstatus.fold(self.status, found)
        self.status.offset = self._status_tail.whole
        try:
            runstatus.write(self.run, self.status)
        except OSError:
            pass  # a full disk: the log's tail still tells readers the truth

    def _estimate_check(self) -> None:
        """Record the measured device-used peak against the pre-flight estimate (issue: does it fit?)."""
        self._update_status()
        peak = self.unattended.watch.life_peak or self.status.peak_used  # after a guard restart: this life's
        if self.status.estimate_gib is None or not peak:
            return
        estimate, measured = self.status.estimate_gib, to_gib(peak)
        error = (measured - estimate) / estimate
        others = self.unattended.watch.life_others
        beside = f"; other processes' {to_gib(others):.2f} GiB left out" if others >= (1 << 29) else ""
        self.log.write(events.Notice(
            t=time.time(), level="info", key="estimate",
            message=f"peak device used {measured:.2f} GiB vs estimate {estimate:.2f} GiB ({error:+.1%}){beside}"))

    def _set_state(self, state: str, reason: str = "", step: int | None = None) -> None:
        self.state = state
        self.log.write(events.State(t=time.time(), state=state, reason=reason, step=step))

    def stderr_tail(self) -> str:
        """The trainer's last lines of stderr (what the guard reads to tell a transient failure)."""
        return "\n".join(self._stderr_tail[-40:])

    def _end(self, state: str, code: int | None, why: str = "") -> str:
        """`why`: the end's error where the trainer's stderr is not it (the guard gave up on a life it stopped)."""
        self._estimate_check()
        signame = ""
        if code is not None and code < 0:
            signame = signal.Signals(-code).name
        error = why or ("\n".join(self._stderr_tail[-40:]) if state == events.FAILED else "")
        if state == events.FAILED and signame:
            who = "command" if self.command else "trainer"  # as the keeper says it of a watched command
            error = f"the {who} was killed by {signame}\n{error}".rstrip()
        rank = failed_rank(self._stderr_tail) if state == events.FAILED else ""
        if rank:
            error = f"{rank} failed; torchrun stopped the other ranks\n{error}"
        cause, said = self.scheduler.cause(code)
        if cause == "REQUEUED":  # no end: the job's next start resumes this run (cli._requeued_run)
            self._set_state(events.SUSPENDED, f"{said}: its next start resumes this run from the last checkpoint")
            return events.SUSPENDED
        if cause:
            state, error = slurm.SCHEDULER_ENDS[cause][0], f"{said}\n{error}".rstrip()
        # The end is what every view waits for: on a full disk, wait for room rather than lose it.
        # The step reached (the status folded the log just now): a SIGKILLed trainer writes no exit record of its
        # own, and without it the advice and the alert said "killed by SIGKILL at step 0" of a run at step 50.
        self.log.write_until_written(events.End(t=time.time(), state=state, exit_code=code, signal=signame,
                                                error=error, cause=cause, step=self.status.step),
                                     gone=lambda: not self.run.path.exists())
        self.state = state
        return state

    # -- the trainer ------------------------------------------------------------------------------

    def _run_trainer(self, resume_from: str | None) -> int:
        """Run the trainer to its exit; its output goes to files, so it outlives a killed supervisor."""
        command = trainer_command(self.run, self.recipe, self.probe, resume_from)
        env = dict(self.user_env, **self.settings.env)
        # Commands sent from now on (a `pause` while the trainer still imports) wait in control.cmds for it
        # (a watched command's hook reads them from its train begin: it gets no such variable).
        env["LORATUI_CMDS_OFFSET"] = str(self._cmds_offset)
        if self.command:
            # The user's program, as they would run it: their buffering, bars and NCCL settings (a plain
            # loop's own print()s reach the log as its stdout flushes them); only the hook's variables added.
            env = watched.command_env(self.run, env)
            watched.say_resume(self.run, resume_from)
            blocked = command_keys.hook_blocked(self.command) if resume_from is None else ""
            if blocked:  # said once, at the first launch: the run is read from its output alone
                self.log.write(events.Notice(t=time.time(), level="warning", key="hook_blocked",
                                             message=command_keys.hook_blocked_note(blocked)))
            env[watched.KEEPER_ENV] = "1"  # for the keeper only: it takes it out of the command's environment
            self.run.hooked.unlink(missing_ok=True)  # this launch's Trainer writes it anew
            self.run.trainer_pidfile.unlink(missing_ok=True)  # and its keeper, the command's pid
        else:
            env = recipe_trainer_env(env, self.settings.env)
        env = self.unattended.trainer_env(env)
        # A watched command's first launch reads what `loratui run` was given on its standard input (a pipe or a
        # file, as nohup passes it; else /dev/null): the supervisor's own, handed on once, then let go of.
        stdin = None if self.command else subprocess.DEVNULL
        fds, self.passed_fds = (self.passed_fds if self.command else ()), ()  # likewise its other descriptors
        with append_file(self.run.stdout_log) as out, append_file(self.run.stderr_log) as err:
            # A watched command leads its own process group: pause and stop reach its every process.
            self.trainer = subprocess.Popen(command, stdin=stdin, stdout=out, stderr=err, env=env,
                                            start_new_session=False, cwd=self.settings.cwd or None, pass_fds=fds)
        inherited_fds.let_go(fds)
        if stdin is None:
            _let_go_of_stdin()  # a restart gets /dev/null; the producer of a pipe sees its one reader end
        done = threading.Event()
        redraw = (lambda text: self._watch([text])) if self.watcher is not None else None
        after_round = _OutputRead(self) if self.command else None
        tail = follow_streams(self.run.stdout_log, self.run.stderr_log, self._emit_output, done, redraw,
                              after_round=after_round, timed=True)
        code = self.trainer.wait()
        self._cmds_offset = file_size(self.run.commands)  # the next trainer starts after what this one read
        done.set()
        tail.join(timeout=5)
        self._close_watcher()  # the last loss the reader held back
        return code

    def _close_watcher(self) -> None:
        """Record what the reader of a watched command's output still held (the last loss line)."""
        with self._watch_lock:
            if self.watcher is not None:
                for event in self.watcher.close():
                    self.log.write(event)

    def _emit_output(self, name: str, texts: list[str], written: float | None = None) -> None:
        """Batched `Output` events (200 lines at most each, so no event is huge); `written`: when the last of the
        lines was written (the steps they print took the time between writes, not between reads)."""
        if name == "stderr":
            self._stderr_tail = (self._stderr_tail + texts)[-200:]
        self._watch(texts, written)
        for first in range(0, len(texts), 200):
            self.log.write(events.Output(t=time.time(), stream=name, lines=texts[first:first + 200]))

    def _watch(self, texts: list[str], written: float | None = None) -> None:
        """Steps and losses from a watched command's output, while no hooked Trainer reports them."""
        if self.watcher is None:
            return
        with self._watch_lock:
            if self.watcher is None or self.run.hooked.exists():
                self.watcher = None
                return
            for event in self.watcher.feed_lines(texts, written):
                if isinstance(event, events.State):
                    self.state = event.state
                self.log.write(event)

    def _run_pids(self) -> list[int]:
        """The trainer's pid and its descendants (dataloader workers), refreshed every few seconds."""
        now = time.monotonic()
        stamp, pids = self._pids_cache
        if now - stamp > 5.0 and self.trainer is not None:
            pids = process_tree(self.trainer.pid)
            self._pids_cache = (now, pids)
        return pids

    # -- control ----------------------------------------------------------------------------------

    def _handle(self, request: control.Request) -> str | None:
        """Accept or refuse a command (clients are served concurrently: one command at a time here)."""
        with self._control_lock:
            return self._handle_one(request)

    def _handle_one(self, request: control.Request) -> str | None:
        """Accept or refuse a command; accepted ones are recorded and relayed to the trainer."""
        command = request.command
        if command not in control.COMMANDS:
            return f"unknown command {command!r}"
        if self.state in events.FINAL_STATES:
            return f"the run has already {self.state}"
        if self.command and self.state != events.SUSPENDED and not self.run.hooked.exists():
            refused = watched.refuse_without_hook(command)
            if refused:
                return refused
        self.log.write(events.Control(t=time.time(), command=command, source=request.source))
        if command == "resume":  # `loratui resume --notify URL` stored a new target just before
            self.unattended.reload_alerts()
        self.suspend_requested |= command == "suspend"
        if command == "suspend":
            self._resume.clear()  # only a resume sent after this suspend resumes it
        elif command == "resume" and self.suspend_requested and self.state != events.SUSPENDED:
            # The trainer is on its way out for a suspend (a watched command's exit reaches us through its
            # keeper): resume as soon as it is suspended rather than lose this resume.
            self._resume.set()
        if command == "stop":
            self.stop_requested = True
            threading.Thread(target=self._enforce_stop, daemon=True).start()
        if self.state == events.SUSPENDED:
            if command in ("resume", "stop"):
                self._resume.set()
                return None
            return "the run is suspended; only resume or stop apply"
        if self.command and command in ("pause", "resume") and not self.run.hooked.exists():
            return self._signal_pause(command == "pause")
        return self._relay(command)

    def _group(self, trainer: subprocess.Popen[bytes]) -> int:
        """The watched command's process group: its keeper (our child) records the command's pid."""
        return self.run.trainer_pid() or trainer.pid

    def _signal_pause(self, pause: bool) -> str | None:
        """Pause or resume a watched command with no hooked Trainer: SIGSTOP/SIGCONT of its group."""
        trainer = self.trainer
        if trainer is None or trainer.poll() is not None:
            return "the command is not running"
        if not watched.signal_tree(self._group(trainer), signal.SIGSTOP if pause else signal.SIGCONT):
            return "the command's process group is gone"
        watcher = self.watcher
        if watcher is not None and pause:  # the held time is no step's time
            watcher.hold()
        elif watcher is not None:
            watcher.release()
        if pause:
            reason, note = watched.pause_words(self.probe is not None)  # GPU memory held only where there is a GPU
            self._set_state(events.PAUSED, reason)  # the status line shows it, from the log
            # Said whole (note) where the headless view and the output pane show it, too.
            self.log.write(events.Notice(t=time.time(), level="warning", key="sigstop", message=note))
            self.log.write(events.Output(t=time.time(), stream="loratui", lines=[f"loratui: {note}"]))
        else:
            self._set_state(events.TRAINING, "resumed")
        return None

    def _relay(self, command: str) -> str | None:
        """Append the command to control.cmds, which the trainer (rank 0) reads at step boundaries."""
        trainer = self.trainer
        if trainer is not None and trainer.poll() is not None:
            # A stop's SIGTERM (sent at once, beside this) may end a loading trainer before it gets here: the
            # stop was done, not refused.
            return None if command == "stop" else "the trainer is not running"
        # No trainer yet (still starting): the command waits in the file for the trainer's first step.
        self.run.append_command(command)
        return None

    def _enforce_stop(self) -> None:
        """Tell a single trainer at once (it exits now if still loading), then escalate if it hangs."""
        trainer = self.trainer
        if trainer is None:
            return
        if self.command and trainer.poll() is None:
            # A command that has exited already (its keeper lives on a moment) is signalled no more: a crash
            # before the stop stays a failure.
            self._stop_signal(trainer, lambda: watched.stop_signals(self._group(trainer), watched.hook_info(self.run)))
        elif self.recipe.distributed.num_processes in (1,) and trainer.poll() is None:
            # A training process stops at its next step boundary on SIGTERM, as on the command; one still
            # importing or loading weights has nothing to save and ends at once. (Under torchrun the agent
            # would kill every rank on SIGTERM, so there only the command file speaks.) Its exit code stays its
            # own: loratui's trainer takes this SIGTERM for the stop command.
            trainer.send_signal(signal.SIGTERM)
        try:
            trainer.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self._stop_signal(trainer, lambda: self._signal_trainer(trainer, signal.SIGTERM))
            try:
                trainer.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._stop_signal(trainer, lambda: self._signal_trainer(trainer, signal.SIGKILL))

    def _stop_signal(self, trainer: subprocess.Popen[bytes], send: Callable[[], bool]) -> None:
        """Send a stop's signal and record whether it reached the running trainer or command (under the lock: a
        signal sent as it exited is recorded before `_stop_explains` reads it); a watched command's keeper is told
        (`command.STOPPED_SIGNAL`), so that its `exit` says stopped as our End will."""
        with self._stop_signal_lock:
            sent = send()
            self.stop_signalled |= sent
        if sent and self.command and trainer.poll() is None:
            try:
                os.kill(trainer.pid, watched.STOPPED_SIGNAL)
            except ProcessLookupError:
                pass

    def _signal_trainer(self, trainer: subprocess.Popen[bytes], sig: int) -> bool:
        """A recipe's trainer, or a watched command's whole process group (its ranks and workers; a SIGKILL also
        the ranks a launcher started in sessions of their own); False when it had exited already."""
        if self.command and sig == signal.SIGKILL:
            return watched.signal_tree(self._group(trainer), sig)
        if self.command:
            return watched.signal_group(self._group(trainer), sig)
        if trainer.poll() is not None:
            return False
        trainer.send_signal(sig)
        return True

    def end_trainer(self) -> None:
        """End the trainer now (the guard restarts it): SIGTERM stops a single process at its next step
        boundary; torchrun's agent stops every rank on it. Killed if it does not go within the grace."""
        trainer = self.trainer
        if trainer is None or trainer.poll() is not None:
            return
        if self.command and self.run.hooked.exists():  # its Trainer stops at the next step boundary
            self.run.append_command("stop")
        elif self.command:  # the command itself, not its keeper (which forwards SIGTERM anyway)
            os.kill(self._group(trainer), signal.SIGTERM)
        else:
            trainer.terminate()
        try:
            trainer.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self._signal_trainer(trainer, signal.SIGKILL)

    def _requeue(self) -> bool:
        """After the checkpoint saved before the time limit: requeue the job and wait for Slurm to end this
        one. False when no requeue was planned, or Slurm refused it (the run then waits for `resume`)."""
        limit = self.time_limit
        if limit is None or not limit.requeue_pending:
            return False
        self.requeueing = True
        refused = limit.requeue_job()
        if refused:
            self.requeueing = False
            self.log.write(events.Notice(t=time.time(), level="error", key="time_limit",
                                         message=f"scontrol requeue {self.slurm_job} failed: {refused}"))
            return False
        self._set_state(events.SUSPENDED, f"checkpoint saved before the time limit; Slurm job {self.slurm_job} "
                        "requeued: its next start resumes this run from that checkpoint")
        return True  # gone before the job's next start looks for this run (Slurm ends the rest of this one)

    def on_sigterm(self, *_: object) -> None:
        """`kill SUPERVISOR` stops the run cleanly, as `loratui stop` does. In a Slurm job the signal is
        often Slurm's (time limit, scancel, preemption): ask it why, beside the stop, for the run's end."""
        if self.requeueing:  # our own requeue: the run goes on in the job's next start
            return
        self.scheduler.signalled()
        self._handle(control.Request("stop", "signal"))


HISTORY_READ = 16 << 20
"""Bytes of an adopted run's log read at a time while its history is folded."""


def trainer_base_env(run: RunDir, adopt: bool) -> tuple[dict[str, str], str]:
    """(the environment the trainer starts from, a warning or ''). The first supervisor's is the user's (`loratui
    run` started it): kept (`RunDir.first_env`, 0600) for every later supervisor of the run. One that re-adopts it
    (`loratui resume` of a suspended run whose supervisor died) was started from whatever shell ran the resume: the
    resumed command got that shell's variables (one set only there, none of those set only where the run began), so
    it takes the kept one. A Slurm job's next start (a requeue) takes its own: the job's variables are the new job's."""
    environ = dict(os.environ)
    requeued = bool(environ.get("SLURM_JOB_ID") and environ.get("SLURM_RESTART_COUNT"))
    if not adopt or requeued:
        if not adopt:
            try:
                run.keep_first_env(environ)
            except OSError:
                pass  # an unwritable state directory: a re-adopting supervisor says so
        return environ, ""
    kept = run.kept_first_env()
    if kept is not None:
        return kept, ""
    return environ, ("the environment the run was first started with was not found (a run of an older loratui, or "
                     "an unwritable state directory): the trainer gets the environment of the shell that resumed it")


def recipe_trainer_env(env: dict[str, str], settings_env: dict[str, str]) -> dict[str, str]:
    """What loratui's own trainer (a recipe run) gets beyond the user's environment; a watched command gets
    none of it: unbuffered output (read live), no tqdm bars (loratui draws progress), and NVLink multicast
    left off (not needed for DDP/FSDP, and it misbehaves on some hosts)."""
    env = dict(env, PYTHONUNBUFFERED=settings_env.get("PYTHONUNBUFFERED", "1"), TQDM_DISABLE="1")
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    return env


def trainer_command(run: RunDir, recipe: Recipe, probe: GpuProbe | None, resume_from: str | None) -> list[str]:
    """`python -m loratui.trainer RUN`, under torchrun when the recipe asks for several processes; a
    watched run's own command as it was given (a resume reaches it through its environment)."""
    watched_command = run.read_settings().command
    if watched_command:  # its keeper runs it, and outlives this supervisor (supervisor/keeper.py)
        return [sys.executable, "-m", "loratui.supervisor.keeper", str(run.path), "--", *watched_command]
    command = ["-m", "loratui.trainer", str(run.path)] + (["--resume-from", resume_from] if resume_from else [])
    n = recipe.distributed.num_processes
    if n == "auto":
        n = len(probe.devices()) if probe is not None else 1
    if n <= 1:
        return [sys.executable, *command]
    # torchrun stops every rank when one fails, so no orphan rank keeps holding a GPU.
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={n}", "--master_addr=127.0.0.1",
            f"--master_port={free_port()}", *command]


def start_indexer(run: RunDir) -> subprocess.Popen[bytes] | None:
    """`python -m loratui.sources.indexer RUN`: keeps events.idx current while the run goes, so a replay of
    even a 1 GB log never folds it all first. Its stdin is its lifeline: closed at the end (or by our
    death), it indexes the rest, saves and exits. None when it cannot start (a replay then indexes)."""
    try:
        return subprocess.Popen([sys.executable, "-m", "loratui.sources.indexer", str(run.path)],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, close_fds=True)
    except OSError:
        return None


def finish_indexer(indexer: subprocess.Popen[bytes] | None) -> None:
    """Tell the indexer the log is complete, and give it time to save (the end event is already written:
    no view waits for this)."""
    if indexer is None:
        return
    try:
        if indexer.stdin is not None:
            indexer.stdin.close()
        indexer.wait(timeout=INDEXER_WAIT_S)
    except (OSError, subprocess.TimeoutExpired):
        pass  # it goes on alone and saves when done


def free_port() -> int:
    """A TCP port nobody listens on now (for the ranks' rendezvous)."""
    import socket

    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        return int(probe_socket.getsockname()[1])


def failed_rank(stderr_lines: list[str]) -> str:
    """'rank 1 (exit code -9)' from torchrun's failure summary, or ''."""
    text = "\n".join(stderr_lines[-80:])
    rank = re.search(r"rank\s*:\s*(\d+)", text)
    code = re.search(r"exitcode\s*:\s*(-?\d+)", text)
    if not rank:
        return ""
    return f"rank {rank.group(1)}" + (f" (exit code {code.group(1)})" if code else "")


def process_tree(root: int) -> list[int]:
    """`root` and every descendant (dataloader workers, torchrun's ranks)."""
    try:
        proc = psutil.Process(root)
        return [root] + [child.pid for child in proc.children(recursive=True)]
    except psutil.Error:
        return [root]



def main(argv: list[str] | None = None) -> int:
    """Entry point of the detached process."""
    args = sys.argv[1:] if argv is None else argv
    run = RunDir(Path(args[0]))
    adopt = "--adopt" in args[1:]
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if "--interrupt-ignored" in args[1:]:  # `loratui run` itself started with SIGINT ignored (a background job):
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the watched command inherits that, as it would alone
    probe, reason = open_probe()
    supervisor = Supervisor(run, probe, reason, adopt=adopt, kept_env="--kept-env" in args[1:],
                            fds=inherited_fds.from_arguments(args[1:]))
    signal.signal(signal.SIGTERM, supervisor.on_sigterm)
    return supervisor.main()


def _let_go_of_stdin() -> None:
    """Point this process's standard input at /dev/null (the command has the real one now)."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(devnull, 0)
    finally:
        os.close(devnull)


class _OutputRead:
    """After each round of a watched command's output tail: once the command has exited (its keeper, our child,
    waits for us before it writes its `exit`), and a round begun after that has read its output to the end, record
    what the reader still held and tell the keeper (`command.READ_SIGNAL`). The keeper's `exit` then takes the last
    step from the log, from this one reader: it had read the output a second time for it, since this tail polls and
    the reader holds the last loss line until the output closes (the keeper's exit, written before, lagged)."""

    def __init__(self, owner: Supervisor) -> None:
        self.owner = owner
        self.exited = False  # the command was seen gone after a round: the next round reads all it wrote
        self.told = False

    def __call__(self) -> None:
        if self.told:
            return
        run, keeper = self.owner.run, self.owner.trainer
        if not self.exited:  # its keeper records its pid once started, and keeps the file until it exits
            self.exited = run.trainer_pidfile.exists() and run.trainer_pid() is None
            return
        self.owner._close_watcher()
        self.told = True
        if keeper is not None and keeper.poll() is None:
            try:
                os.kill(keeper.pid, watched.READ_SIGNAL)
            except ProcessLookupError:
                pass


if __name__ == "__main__":
    sys.exit(main())

