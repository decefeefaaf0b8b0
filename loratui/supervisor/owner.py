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
from pathlib import Path

from loratui import __version__, events
from loratui.eventlog import EventWriter
from loratui.recipe import Recipe, load_recipe, recipe_hash
from loratui.rundir import SUSPEND_EXIT, RunDir, latest_checkpoint
from loratui.supervisor import control
from loratui.supervisor.gpu import GpuProbe, open_probe
from loratui.supervisor.sampler import Sampler
from loratui.units import to_gib

STOP_GRACE_S = 60.0
"""How long a stopping trainer may take to reach a step boundary before it is terminated."""


class Supervisor:
    """Owns the trainer process and the run's log for the run's whole life."""

    def __init__(self, run: RunDir, probe: GpuProbe | None = None, probe_reason: str = "") -> None:
        self.run = run
        self.log = EventWriter(run.events)
        self.settings = run.read_settings()
        self.recipe = load_recipe(run.recipe)
        self.probe, self.probe_reason = probe, probe_reason
        self.trainer: subprocess.Popen[bytes] | None = None
        self.state = events.STARTING
        self.stop_requested = False
        self._resume = threading.Event()
        self._stderr_tail: list[str] = []
        self._pids_cache: tuple[float, list[int]] = (0.0, [])
        self._peak_used = 0

    # -- life cycle -------------------------------------------------------------------------------

    def main(self) -> int:
        """Run to the end; the exit code mirrors the run's outcome."""
        self.run.pidfile.write_text(str(os.getpid()))
        server = control.listen(self.run.control)
        threading.Thread(target=self._serve, args=(server,), daemon=True).start()
        self._write_header()
        sampler = self._start_sampler()
        try:
            final = self._drive()
        finally:
            if sampler is not None:
                sampler.stop()
            server.close()
            for path in (self.run.control, self.run.pidfile):
                path.unlink(missing_ok=True)
            self.log.close()
        return 0 if final == events.FINISHED else 1

    def _drive(self) -> str:
        """Spawn the trainer, and again after each suspend/resume, until the run ends."""
        resume_from = self.settings.resume_from
        while True:
            code = self._run_trainer(resume_from)
            if code == SUSPEND_EXIT and not self.stop_requested:
                self._set_state(events.SUSPENDED, "checkpoint written, GPU freed; resume with `r`")
                self._resume.wait()
                self._resume.clear()
                if self.stop_requested:
                    return self._end(events.STOPPED, code)
                resume_from = latest_checkpoint(self.run.checkpoints)
                self._set_state(events.STARTING, f"resuming from {resume_from}")
                continue
            # A stop that had to terminate a trainer stuck before its next step is still a stop.
            stopped_ok = (0, SUSPEND_EXIT, -signal.SIGTERM, -signal.SIGKILL)
            if code == 0 or (self.stop_requested and code in stopped_ok):
                return self._end(events.STOPPED if self.stop_requested else events.FINISHED, code)
            return self._end(events.FAILED, code)

    def _write_header(self) -> None:
        if self.run.events.stat().st_size > 0:
            return  # a restarted supervisor appends to the log it already has
        text = self.run.recipe.read_text(encoding="utf-8")
        self.log.write(events.Header(
            t=time.time(), schema=events.SCHEMA_VERSION, run_id=self.run.run_id,
            recipe_hash=recipe_hash(text), recipe_path=self.settings.recipe_source,
            name=self.settings.name, created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            loratui_version=__version__, argv=sys.argv,
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
        sampler = Sampler(self.probe, self._record_sample, sample_hz=self.recipe.monitor.sample_hz,
                          record_hz=self.recipe.monitor.record_hz, run_pids=self._run_pids)
        sampler.start()
        return sampler

    def _record_sample(self, event: events.AnyEvent) -> None:
        """Write a sampler event, keeping the run's device-used peak for the estimate check."""
        if isinstance(event, events.Sample):
            self._peak_used = max(self._peak_used, event.used_max)
        self.log.write(event)

    def _estimate_check(self) -> None:
        """Record the measured device-used peak against the pre-flight estimate (issue: does it fit?)."""
        from loratui.eventlog import read_log

        found = [e for e in read_log(self.run.events).events if isinstance(e, events.Estimate)]
        if not found or not self._peak_used:
            return
        estimate, measured = found[-1].peak_device_gib, to_gib(self._peak_used)
        error = (measured - estimate) / estimate
        self.log.write(events.Notice(
            t=time.time(), level="info", key="estimate",
            message=f"peak device used {measured:.2f} GiB vs estimate {estimate:.2f} GiB ({error:+.1%})"))

    def _set_state(self, state: str, reason: str = "") -> None:
        self.state = state
        self.log.write(events.State(t=time.time(), state=state, reason=reason))

    def _end(self, state: str, code: int | None) -> str:
        self._estimate_check()
        signame = ""
        if code is not None and code < 0:
            signame = signal.Signals(-code).name
        error = "\n".join(self._stderr_tail[-40:]) if state == events.FAILED else ""
        if state == events.FAILED and signame:
            error = f"the trainer was killed by {signame}\n{error}".rstrip()
        rank = failed_rank(self._stderr_tail) if state == events.FAILED else ""
        if rank:
            error = f"{rank} failed; torchrun stopped the other ranks\n{error}"
        self.log.write(events.End(t=time.time(), state=state, exit_code=code, signal=signame, error=error))
        self.state = state
        return state

    # -- the trainer ------------------------------------------------------------------------------

    def _run_trainer(self, resume_from: str | None) -> int:
        """Run the trainer to its exit; its output goes to files, so it outlives a killed supervisor."""
        command = trainer_command(self.run, self.recipe, self.probe, resume_from)
        env = dict(os.environ, PYTHONUNBUFFERED="1", TQDM_DISABLE="1", **self.settings.env)
        # Leave NVLink multicast off: it is not needed for DDP/FSDP and misbehaves on some hosts.
        env.setdefault("NCCL_NVLS_ENABLE", "0")
        with open(self.run.stdout_log, "ab") as out, open(self.run.stderr_log, "ab") as err:
            self.trainer = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                                            start_new_session=False)
        done = threading.Event()
        tails = [threading.Thread(target=self._follow, args=(path, name, done), daemon=True)
                 for path, name in ((self.run.stdout_log, "stdout"), (self.run.stderr_log, "stderr"))]
        for tail in tails:
            tail.start()
        code = self.trainer.wait()
        done.set()
        for tail in tails:
            tail.join(timeout=5)
        return code

    def _follow(self, path: Path, name: str, done: threading.Event) -> None:
        """Turn new lines of one trainer output file into batched `Output` events."""
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            pending = b""
            while True:
                finished = done.is_set()
                pending += handle.read()
                lines, _, pending = pending.rpartition(b"\n")
                if lines:
                    self._emit_output(name, lines)
                if finished:
                    if pending:
                        self._emit_output(name, pending)
                    return
                done.wait(0.25)

    def _emit_output(self, name: str, block: bytes) -> None:
        # A progress bar redraws with \r: only its last state is worth a line.
        texts = [raw.decode("utf-8", "replace").split("\r")[-1][:2000] for raw in block.split(b"\n")]
        if name == "stderr":
            self._stderr_tail = (self._stderr_tail + texts)[-200:]
        for first in range(0, len(texts), 200):
            self.log.write(events.Output(t=time.time(), stream=name, lines=texts[first:first + 200]))

    def _run_pids(self) -> list[int]:
        """The trainer's pid and its descendants (dataloader workers), refreshed every few seconds."""
        now = time.monotonic()
        stamp, pids = self._pids_cache
        if now - stamp > 5.0 and self.trainer is not None:
            pids = process_tree(self.trainer.pid)
            self._pids_cache = (now, pids)
        return pids

    # -- control ----------------------------------------------------------------------------------

    def _serve(self, server: object) -> None:
        assert hasattr(server, "accept")
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            control.serve_one(conn, self._handle)

    def _handle(self, request: control.Request) -> str | None:
        """Accept or refuse a command; accepted ones are recorded and relayed to the trainer."""
        command = request.command
        if command not in control.COMMANDS:
            return f"unknown command {command!r}"
        if self.state in events.FINAL_STATES:
            return f"the run has already {self.state}"
        self.log.write(events.Control(t=time.time(), command=command, source=request.source))
        if command == "stop":
            self.stop_requested = True
            threading.Thread(target=self._enforce_stop, daemon=True).start()
        if self.state == events.SUSPENDED:
            if command in ("resume", "stop"):
                self._resume.set()
                return None
            return "the run is suspended; only resume or stop apply"
        return self._relay(command)

    def _relay(self, command: str) -> str | None:
        """Append the command to control.cmds, which the trainer (rank 0) reads at step boundaries."""
        trainer = self.trainer
        if trainer is None or trainer.poll() is not None:
            return "the trainer is not running"
        fd = os.open(self.run.commands, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, command.encode() + b"\n")
        finally:
            os.close(fd)
        return None

    def _enforce_stop(self) -> None:
        """Tell a single trainer at once (it exits now if still loading), then escalate if it hangs."""
        trainer = self.trainer
        if trainer is None:
            return
        if self.recipe.distributed.num_processes in (1,) and trainer.poll() is None:
            # A training process stops at its next step boundary on SIGTERM, as on the command; one still
            # importing or loading weights has nothing to save and ends at once. (Under torchrun the agent
            # would kill every rank on SIGTERM, so there only the command file speaks.)
            trainer.send_signal(signal.SIGTERM)
        try:
            trainer.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            trainer.terminate()
            try:
                trainer.wait(timeout=10)
            except subprocess.TimeoutExpired:
                trainer.kill()

    def on_sigterm(self, *_: object) -> None:
        """`kill SUPERVISOR` stops the run cleanly, as `loratui stop` does."""
        self._handle(control.Request("stop", "signal"))


def trainer_command(run: RunDir, recipe: Recipe, probe: GpuProbe | None, resume_from: str | None) -> list[str]:
    """`python -m loratui.trainer RUN`, under torchrun when the recipe asks for several processes."""
    command = ["-m", "loratui.trainer", str(run.path)] + (["--resume-from", resume_from] if resume_from else [])
    n = recipe.distributed.num_processes
    if n == "auto":
        n = len(probe.devices()) if probe is not None else 1
    if n <= 1:
        return [sys.executable, *command]
    # torchrun stops every rank when one fails, so no orphan rank keeps holding a GPU.
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={n}", "--master_addr=127.0.0.1",
            f"--master_port={free_port()}", *command]


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
    """`root` and every descendant, read from /proc (Linux); just `root` elsewhere."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return [root]
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def main(argv: list[str] | None = None) -> int:
    """Entry point of the detached process."""
    args = sys.argv[1:] if argv is None else argv
    run = RunDir(Path(args[0]))
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    probe, reason = open_probe()
    supervisor = Supervisor(run, probe, reason)
    signal.signal(signal.SIGTERM, supervisor.on_sigterm)
    return supervisor.main()


if __name__ == "__main__":
    sys.exit(main())
