"""`python -m loratui.supervisor.keeper RUN -- COMMAND`: a watched command's parent, which outlives its supervisor.

A recipe run's trainer stands in for a supervisor killed with SIGKILL (trainer/orphan.py). A watched command
is the user's program: nothing of loratui may run in it for that (a thread, a signal handler would be a
trace), and a plain loop has no hook at all. So the supervisor starts this small process, which starts the
command in a process group of its own, records its pid as the run's trainer (`trainer.pid`: `ls` says who
lives, `loratui pause/stop` write to `control.cmds` when no supervisor answers), waits for it and exits as
it did (the same code, or killed by the same signal). While the supervisor lives it does nothing else; when the
command has exited, it waits for the supervisor, its parent, to read the command's output to its end and record the
steps it printed (`command.READ_SIGNAL`), so that its `exit` says the last step from the log, as the End will.
When the supervisor dies it takes over what the supervisor did for the run: it records the command's
output, obeys `control.cmds` for a command with no hooked Trainer (SIGSTOP/SIGCONT/SIGTERM of its group;
a hooked Trainer reads that file itself), and writes the run's end and sends its alert.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from loratui import events, runstatus
from loratui.eventlog import EventWriter
from loratui.outputtail import follow_streams, last_redraw
from loratui.rundir import STOPPED_CODES, SUSPEND_EXIT, CommandTail, RunDir, file_size, write_pidfile
from loratui.supervisor.command import (
    KEEPER_ENV,
    PARENT_ENV,
    READ_SIGNAL,
    STOPPED_SIGNAL,
    header_has_gpu,
    pause_words,
    signal_group,
    signal_tree,
)
from loratui.supervisor import inherited_fds
from loratui.supervisor.watch_output import OutputWatcher

POLL_S = 1.0
READ_WAIT_S = 5.0
"""How long the keeper waits, once the command exited, for its supervisor to have read the output's last steps."""


class Keeper:
    """Runs the command; after the supervisor's death, stands in for it."""

    def __init__(self, run: RunDir, command: list[str], poll_s: float = POLL_S) -> None:
        self.run, self.command, self.poll_s = run, command, poll_s
        self.orphaned = False
        self.stop_requested = False
        self.stop_signalled = False  # this keeper sent a stop's SIGTERM: the command's exit code is the signal's
        self.log: EventWriter | None = None
        # the command file from its end now: before the supervisor dies, what it relays there (its stop, which a
        # hooked Trainer obeys) is read at the exit; once orphaned, what `loratui` writes (`_adopt` moves it on)
        self._commands = CommandTail(run.commands, file_size(run.commands))
        self._done = threading.Event()
        self._threads: list[threading.Thread] = []
        self._watcher: OutputWatcher | None = None
        self._read = threading.Event()  # the supervisor read the command's output to its end (READ_SIGNAL)

    def run_command(self) -> int:
        """The command's exit: its code, or -N when signal N killed it."""
        env = dict(os.environ)
        env.pop(KEEPER_ENV, None)
        env[PARENT_ENV] = str(os.getpid())  # the command's parent is this process (suspend reads it)
        fds = inherited_fds.inherited()
        try:
            # Its standard input is the keeper's: what the supervisor passed on (the user's pipe or file), or
            # /dev/null; and so are the descriptors beyond 0-2 it would inherit alone (`inherited_fds`).
            child = subprocess.Popen(self.command, env=env, process_group=0, pass_fds=fds)
        except OSError as exc:  # as a shell says it: the run then ends failed with this line
            print(f"loratui: cannot run {self.command[0]}: {exc.strerror or exc}", file=sys.stderr)
            return 127
        inherited_fds.let_go(fds)
        # SIGTERM sent to this keeper (a guard's restart) is meant for the command. A Python handler, not
        # SIG_IGN: an ignored signal would stay ignored in the command across exec.
        signal.signal(signal.SIGTERM, lambda *_: _forward(child.pid, signal.SIGTERM))
        signal.signal(READ_SIGNAL, lambda *_: self._read.set())  # before the pid: the supervisor sends it after that
        signal.signal(STOPPED_SIGNAL, lambda *_: self._stopped_by_supervisor())
        write_pidfile(self.run.trainer_pidfile, child.pid)
        try:
            while True:
                try:
                    return child.wait(timeout=self.poll_s)
                except subprocess.TimeoutExpired:
                    self._check(child.pid)
        finally:
            self._finish(child.returncode if child.returncode is not None else 1)
            self.run.trainer_pidfile.unlink(missing_ok=True)

    def _stopped_by_supervisor(self) -> None:
        self.stop_requested = self.stop_signalled = True

    def _wait_for_reader(self) -> None:
        """The command exited: wait (`READ_WAIT_S` at most) for the supervisor to read its output's last steps, where
        the supervisor reads them (a command with no hooked Trainer) and is this process's parent (it says so:
        `_OutputRead` in owner.py); the wait ends early if it dies."""
        if self.run.hooked.exists() or self.run.supervisor_pid() != os.getppid():
            return
        deadline = time.monotonic() + READ_WAIT_S
        while not self._read.wait(0.05):
            if time.monotonic() > deadline or self.run.supervisor_pid() is None:
                return

    def _check(self, pid: int) -> None:
        if not self.orphaned and self.run.supervisor_pid() is None:
            self._adopt()
        if self.orphaned:
            self._obey(pid)

    def _adopt(self) -> None:
        self.orphaned = True
        self.log = EventWriter(self.run.events)
        self._commands.offset = file_size(self.run.commands)  # the supervisor obeyed what came before
        self.log.write(events.Notice(
            t=time.time(), level="warning", key="supervisor_lost",
            message="the supervisor died; the command goes on, obeys loratui pause/resume/stop, and its output "
                    "and end are still recorded"))
        counts, last = {"stdout": 0, "stderr": 0}, {"stdout": "", "stderr": ""}

        def counted(outputs: Iterator[events.Output]) -> Iterator[events.Output]:
            for output in outputs:  # streamed: a long run's output is never held whole
                counts[output.stream] += len(output.lines)
                last[output.stream] = output.lines[-1] if output.lines else last[output.stream]
                yield output

        recorded = counted(recorded_output(self.run))
        if not self.run.hooked.exists():  # steps read from the output, as the supervisor read them
            self._watcher = OutputWatcher()
            self._watcher.replay(recorded)  # its phase, step offset and held-back line
            step = runstatus.read(self.run).step  # (a step the output recorded does not show, such as a bar's redraw)
            self._watcher.began, self._watcher.step = self._watcher.began or step > 0, max(self._watcher.step, step)
        for _ in recorded:
            pass  # (a hooked Trainer's run: the lines are only counted)
        # From the end of what the supervisor recorded, not the files' end: lines printed since its last read
        # (up to a poll before its death) are recorded too.
        starts = [_after_lines(path, counts[name], last[name])
                  for path, name in ((self.run.stdout_log, "stdout"), (self.run.stderr_log, "stderr"))]
        self._threads.append(follow_streams(self.run.stdout_log, self.run.stderr_log, self._output, self._done,
                                            starts=starts, timed=True))

    def _output(self, stream: str, lines: list[str], written: float | None = None) -> None:
        assert self.log is not None
        self.log.write(events.Output(t=time.time(), stream=stream, lines=lines))
        for event in self._watcher.feed_lines(lines, written) if self._watcher is not None else []:
            self.log.write(event)

    def _obey(self, pid: int) -> None:
        """Commands `loratui pause/resume/stop` wrote since the supervisor died."""
        assert self.log is not None
        commands = self._commands.new()
        if not commands:
            return
        hooked = self.run.hooked.exists()  # a hooked Trainer reads the file itself
        for command in commands:
            self.stop_requested |= command == "stop"
            if hooked:
                continue
            watcher = self._watcher  # the held time is no step's time, as the supervisor reads it (owner.py)
            if command == "pause" and signal_tree(pid, signal.SIGSTOP):
                if watcher is not None:
                    watcher.hold()
                reason = pause_words(header_has_gpu(self.run))[0]
                self.log.write(events.State(t=time.time(), state=events.PAUSED, reason=reason))
            elif command == "resume" and signal_tree(pid, signal.SIGCONT):
                if watcher is not None:
                    watcher.release()
                self.log.write(events.State(t=time.time(), state=events.TRAINING, reason="resumed"))
            elif command == "stop":
                signal_tree(pid, signal.SIGCONT)
                self.stop_signalled |= signal_group(pid, signal.SIGTERM)

    def _finish(self, code: int) -> None:
        """The command exited: say how in the log (a supervisor killed before its End leaves the outcome
        known); when orphaned, record the rest of its output and the run's end."""
        if not self.orphaned:
            self._wait_for_reader()
        # a stop written since the last poll (orphaned), or one the supervisor relayed (a hooked Trainer's; the stop's
        # signal, if any, tells its own): a hooked Trainer may have left at it already
        self.stop_requested |= "stop" in self._commands.new()
        # The supervisor's own reading (owner.py): a stop asked wins over the suspend's exit, which a Trainer
        # that took a suspend and the stop at one step leaves with; after the stop's SIGTERM, any exit code is the
        # signal's (torchrun exits 1 once it terminated its ranks).
        stopped = self.stop_requested and (code in STOPPED_CODES or self.stop_signalled)
        state = events.STOPPED if stopped else events.FINISHED if code == 0 else events.FAILED
        suspended = code == SUSPEND_EXIT and self.run.hooked.exists() and not stopped
        if self.orphaned:
            self._drain()  # the output's last steps recorded before the exit says the step
        log = self.log or EventWriter(self.run.events)
        log.write(events.Exit(t=time.time(), state=events.SUSPENDED if suspended else state, exit_code=code,
                              step=runstatus.read(self.run).step))
        if log is not self.log:
            log.close()
        if not self.orphaned and self.run.supervisor_pid() is None:
            self._adopt()  # it died since the last poll (up to `poll_s` ago): nobody else will write the end
        self._drain()
        if not self.orphaned or self.log is None:
            return
        step = runstatus.read(self.run).step
        if suspended:
            self.log.write(events.State(t=time.time(), state=events.SUSPENDED, step=step,
                                        reason="checkpoint written; `loratui resume` re-adopts the run"))
            return
        signame = signal.Signals(-code).name if code < 0 else ""
        error = _tail(self.run.stderr_log) if state == events.FAILED else ""
        if signame and state == events.FAILED:
            error = f"the command was killed by {signame}\n{error}".rstrip()
        self.log.write(events.End(t=time.time(), state=state, exit_code=code, signal=signame, error=error,
                                  step=step))
        self.log.close()
        runstatus.send_last_alert(self.run)

    def _drain(self) -> None:
        """Read the output to its end and record what the reader still held (the last loss line)."""
        self._done.set()
        for thread in self._threads:
            thread.join(timeout=2)
        self._threads.clear()
        if self.log is not None and self._watcher is not None:
            for event in self._watcher.close():
                self.log.write(event)
            self._watcher = None


def recorded_output(run: RunDir) -> Iterator[events.Output]:
    """The command's output the log holds (stdout and stderr, in the order recorded). Only the lines naming an
    output event are decoded: a long run's log is mostly samples."""
    try:
        with open(run.events, "rb") as handle:
            for raw in handle:
                if b'"kind":"output"' not in raw:
                    continue
                event = events.decode_line(raw)
                if isinstance(event, events.Output) and event.stream in ("stdout", "stderr"):
                    yield event
    except OSError:
        return


def _after_lines(path: Path, count: int, last: str) -> int:
    """Where in an output file the `count` lines already recorded from it end (the last of them `last`): after as
    many whole lines (the file is only appended to). A file rotated since (copytruncate: it holds fewer lines) is
    read from after the last recorded line found in it, else from its start (all it holds came after the rotation)."""
    try:
        data = path.read_bytes()
    except OSError:
        return 0
    parts = data.split(b"\n")[:-1]  # the whole lines (a line still being written ends no part)
    if len(parts) >= count:
        return sum(len(part) + 1 for part in parts[:count])
    end = data.rfind(b"\n") + 1
    for part in reversed(parts):
        if last_redraw(part) == last:
            return end
        end -= len(part) + 1
    return 0


def _tail(path: Path, lines: int = 40, limit: int = 64 << 10) -> str:
    """The last lines of the command's stderr (bounded: a huge log is read from its end)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, file_size(path) - limit))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _forward(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def exit_as(code: int) -> None:
    """Leave as the command did: its exit code, or killed by the same signal (the supervisor reads -N)."""
    if code >= 0:
        sys.exit(code)
    try:
        signal.signal(-code, signal.SIG_DFL)
    except (OSError, ValueError):
        pass  # SIGKILL and SIGSTOP take no handler: their default is all they have (a cgroup OOM kill is -9)
    os.kill(os.getpid(), -code)
    sys.exit(128 - code)  # a signal that does not end a process by default


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 3 or args[1] != "--":
        sys.exit("usage: python -m loratui.supervisor.keeper RUN_DIR -- COMMAND...")
    exit_as(Keeper(RunDir(Path(args[0])), args[2:]).run_command())


if __name__ == "__main__":
    main()
