"""When the supervisor dies (kill -9, the OOM killer), the trainer takes over what it did for the run.

Training is what the user waits for, so it goes on: rank 0 notices within `POLL_S` that the supervisor's
pid is gone, records that, follows its own output files into the log (nobody else will), keeps obeying
`control.cmds` (which `loratui pause/resume/stop` append to directly when no supervisor answers), and
writes the run's end itself. A suspended orphan records `suspended`; `loratui resume` re-adopts it with a
new supervisor.
"""

from __future__ import annotations

import threading
import time
import traceback
from typing import Any

from loratui import events
from loratui.eventlog import EventWriter
from loratui.outputtail import follow_streams
from loratui.rundir import RunDir

POLL_S = 1.0


class OwnerWatch:
    """Watches the supervisor from rank 0; after its death, stands in for it."""

    def __init__(self, run: RunDir, log: EventWriter, poll_s: float = POLL_S) -> None:
        self.run, self.log, self.poll_s = run, log, poll_s
        self.orphaned = threading.Event()
        self._done = threading.Event()
        self._threads: list[threading.Thread] = []
        self._owned = False
        self._adopting = threading.Lock()

    def start(self) -> None:
        if self.run.supervisor_pid() is None:
            return  # started by hand (a test, a debugger): there is no owner to lose
        self._owned = True
        threading.Thread(target=self._watch, daemon=True, name="loratui-owner-watch").start()

    def _watch(self) -> None:
        while not self._done.wait(self.poll_s):
            if self.run.supervisor_pid() is None and not self._done.is_set():
                self._adopt()
                return

    def _adopt(self) -> None:
        with self._adopting:  # the watch thread and finish() may both find the supervisor gone
            if self.orphaned.is_set():
                return
            self.orphaned.set()
            self.log.write(events.Notice(
                t=time.time(), level="warning", key="supervisor_lost",
                message="the supervisor died; the trainer goes on, obeys loratui pause/resume/stop, "
                        "and records its own output and end"))
            self._threads.append(follow_streams(self.run.stdout_log, self.run.stderr_log, self._output, self._done))

    def _output(self, stream: str, lines: list[str]) -> None:
        self.log.write(events.Output(t=time.time(), stream=stream, lines=lines))

    def finish(self, state: str, code: int, step: int, error: BaseException | None = None) -> None:
        """The trainer is exiting: when orphaned, flush its output and write the run's end."""
        if self._owned and self.run.supervisor_pid() is None:
            self._adopt()  # it died since the last poll (up to `poll_s` ago): nobody else will write the end
        self._done.set()
        for thread in self._threads:
            thread.join(timeout=2)
        if not self.orphaned.is_set():
            return
        if state == events.SUSPENDED:
            self.log.write(events.State(t=time.time(), state=events.SUSPENDED, step=step,
                                        reason="checkpoint written; `loratui resume` re-adopts the run"))
            return
        text = "".join(traceback.format_exception(error))[-4000:] if error is not None else ""
        self.log.write(events.End(t=time.time(), state=state, exit_code=code, error=text, step=step))
        self._alert_the_end()

    def _alert_the_end(self) -> None:
        """Send the end's alert the supervisor would have sent (the trainer imports nothing of the owner side
        and never reads the secret itself)."""
        from loratui import runstatus

        runstatus.send_last_alert(self.run)


def outcome(code: int | None, stop_requested: bool, error: Any) -> str:
    """The run's final state from the trainer's own exit."""
    if error is not None or (code not in (0, None)):
        return events.FAILED
    return events.STOPPED if stop_requested else events.FINISHED
