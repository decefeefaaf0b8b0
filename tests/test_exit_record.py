"""A supervisor killed between its trainer's exit and its own End: the run keeps its true outcome.

The trainer (or a watched command's keeper) writes an `exit` event before it exits, and checks once more
that its supervisor lives: a supervisor that died since the last poll leaves the End to it. Readers (`ls`,
a viewer) take the last `exit` as the outcome of a run with no End and nobody alive; a run without one is
still `lost`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from loratui import events, runstatus
from loratui.eventlog import EventWriter
from loratui.rundir import RunDir, write_pidfile
from loratui.sources.runlog import LiveSource
from loratui.supervisor.keeper import Keeper
from loratui.trainer.orphan import OwnerWatch
from tests.conftest import TINY, kinds, loratui, only_run, wait_for


def _run(tmp_path: Path, *found: events.AnyEvent) -> RunDir:
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    for output in (run.stdout_log, run.stderr_log):  # the supervisor's files for the trainer's output
        output.touch()
    log = EventWriter(run.events)
    log.write(events.Header(t=time.time(), schema=events.SCHEMA_VERSION, run_id="run", recipe_hash="h"))
    for event in found:
        log.write(event)
    log.close()
    return run


def _supervisor(run: RunDir) -> subprocess.Popen[bytes]:
    """A live process recorded as the run's supervisor (the test kills it as SIGKILL would)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    write_pidfile(run.pidfile, proc.pid)
    return proc


def _viewed(run: RunDir) -> list[events.AnyEvent]:
    """Everything a viewer opened on the run is shown, to the end (the writers are gone: two polls)."""
    source, seen = LiveSource(run), []
    for _ in range(3):
        batch = source.poll()
        seen += batch.events
        if batch.ended:
            return seen
    raise AssertionError("the viewer never ended")


def _training(step: int = 3) -> list[events.AnyEvent]:
    now = time.time()
    return [events.State(t=now, state=events.STARTING), events.TrainBegin(t=now, max_steps=step, num_epochs=1.0),
            events.State(t=now, state=events.TRAINING), events.Step(t=now, step=step, epoch=1.0, step_time=0.1)]


def test_a_run_whose_supervisor_died_after_the_trainers_exit_is_not_lost(tmp_path: Path) -> None:
    run = _run(tmp_path, *_training(), events.Exit(t=time.time(), state=events.FINISHED, exit_code=0, step=3))
    status = runstatus.read(run)
    assert (status.state, status.step, status.alive) == (events.FINISHED, 3, "")
    assert status.end is not None and status.end.exit_code == 0 and runstatus.is_over(status)
    last = _viewed(run)[-1]  # a viewer opened on it ends with the same outcome
    assert isinstance(last, events.End) and last.state == events.FINISHED


def test_a_stopped_watched_command_killed_by_sigterm_is_stopped_not_failed(tmp_path: Path) -> None:
    run = _run(tmp_path, *_training(), events.Control(t=time.time(), command="stop"),
               events.Exit(t=time.time(), state=events.FAILED, exit_code=-15, step=3))
    assert runstatus.read(run).state == events.STOPPED


@pytest.mark.parametrize("tail", [
    [],  # the trainer never said how it ended (killed with the supervisor): truly unknown
    [events.Exit(t=time.time(), state=events.FAILED, exit_code=1, step=3),
     events.State(t=time.time(), state=events.STARTING, reason="guard: restarting")],  # a new life began
])
def test_without_the_last_lifes_exit_the_run_is_still_lost(tmp_path: Path, tail: list[events.AnyEvent]) -> None:
    run = _run(tmp_path, *_training(), *tail)
    assert runstatus.read(run).state == runstatus.LOST
    assert not any(isinstance(e, events.End) for e in _viewed(run))


def test_a_trainer_whose_supervisor_died_since_its_last_poll_writes_the_end(tmp_path: Path) -> None:
    run = _run(tmp_path, *_training())
    supervisor = _supervisor(run)
    log = EventWriter(run.events)
    watch = OwnerWatch(run, log, poll_s=3600)  # its poll never comes: only the check at exit can see it
    watch.start()
    supervisor.kill()
    supervisor.wait()
    watch.finish(events.FINISHED, 0, 3)
    log.close()
    (end,) = kinds(run.path, "end")
    assert end["state"] == events.FINISHED and end["step"] == 3


def test_a_keeper_whose_supervisor_died_since_its_last_poll_writes_the_end(tmp_path: Path) -> None:
    run = _run(tmp_path, *_training())
    supervisor = _supervisor(run)
    # The command itself kills the supervisor and exits at once: the keeper's poll (an hour) never runs. It exits
    # once the supervisor is dead (a zombie: this test reaps it below), since SIGKILL takes effect when the victim
    # is next scheduled, which on a loaded machine can be after `sh` exits (then the supervisor is truly alive).
    pid = supervisor.pid
    dead = f"[ ! -e /proc/{pid} ] || grep -q '^{pid} (.*) Z' /proc/{pid}/stat"
    code = Keeper(run, ["sh", "-c", f"kill -9 {pid}; until {dead}; do sleep 0.01; done"], poll_s=3600).run_command()
    supervisor.wait()
    assert code == 0
    exits, ends = kinds(run.path, "exit"), kinds(run.path, "end")
    assert [e["state"] for e in exits] == [events.FINISHED] and [e["state"] for e in ends] == [events.FINISHED]


def test_a_keeper_records_the_commands_exit_while_its_supervisor_lives(tmp_path: Path) -> None:
    run = _run(tmp_path, *_training())
    supervisor = _supervisor(run)
    try:
        code = Keeper(run, ["sh", "-c", "exit 3"], poll_s=3600).run_command()
    finally:
        supervisor.kill()
        supervisor.wait()
    assert code == 3 and not kinds(run.path, "end")  # the End is the supervisor's to write
    (exit_,) = kinds(run.path, "exit")
    assert exit_["state"] == events.FAILED and exit_["exit_code"] == 3
    assert runstatus.read(run).state == events.FAILED  # ... and if it dies now, readers still know


@pytest.mark.slow
def test_the_end_follows_the_trainers_exit_without_the_interpreters_teardown(runs_dir: Path) -> None:
    """The trainer leaves without tearing down torch and transformers (1.3-2.8 s on a loaded 2-core box, which
    the End waited on: the window a killed supervisor left without one). Measured: 2.3-2.7 s before, 0.1 s after."""
    result = loratui("run", str(TINY), "--headless", "--max-steps", "3", "--runs-dir", str(runs_dir))
    assert result.returncode == 0, result.stderr[-2000:]
    run = only_run(runs_dir)
    (exit_,), (end,) = kinds(run, "exit"), kinds(run, "end")
    assert exit_["state"] == end["state"] == events.FINISHED
    assert float(end["t"]) - float(exit_["t"]) < 1.0  # type: ignore[arg-type]


def _printing(run: RunDir, steps: int, wait_s: float = 0.0) -> list[str]:
    """A command that prints `step N loss X` lines into the run's stdout file (the supervisor redirects a watched
    command's output there) and exits at once, after `wait_s`."""
    text = "".join(f"step {n} loss {3 - n / 10:.2f}\n" for n in range(1, steps + 1))
    return [sys.executable, "-c", f"import time; time.sleep({wait_s}); open({str(run.stdout_log)!r}, 'a').write({text!r})"]


def test_a_keepers_exit_has_the_last_step_its_supervisor_read(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain loop's steps are read from its output by the supervisor, whose tail polls every 0.25 s and whose
    reader holds the last loss line until the output closes: the keeper's exit, written as the command exits, said
    the step the log had then (17 of a 35-step loop, its End 35). The keeper read the output a second time for it,
    with a reader of its own; now it reads nothing while its supervisor lives: it waits for the supervisor (its
    parent) to read the output to its end (owner.py `_OutputRead`, played here by a thread) and takes the step from
    the log."""
    from loratui.supervisor import keeper as keeper_module
    from loratui.supervisor.command import READ_SIGNAL
    from loratui.supervisor.watch_output import OutputWatcher

    run = _run(tmp_path, *_training())  # the supervisor recorded up to step 3
    write_pidfile(run.pidfile, os.getppid())  # this process's parent stands for the keeper's, the supervisor
    tails: list[object] = []
    monkeypatch.setattr(keeper_module, "follow_streams", lambda *args, **kwargs: tails.append(args))

    def supervisor() -> None:  # reads the output once the command has exited, records its steps, says so
        gone = lambda: run.trainer_pidfile.exists() and run.trainer_pid() is None
        wait_for(gone, timeout=30, every=0.02)
        watcher, log = OutputWatcher(), EventWriter(run.events)
        watcher.began, watcher.step = True, 3
        for line in run.stdout_log.read_text().splitlines():
            for event in watcher.feed(line):
                log.write(event)
        for event in watcher.close():
            log.write(event)
        log.close()
        os.kill(os.getpid(), READ_SIGNAL)

    reader = threading.Thread(target=supervisor, daemon=True)
    before = signal.getsignal(READ_SIGNAL)
    try:
        reader.start()
        code = Keeper(run, _printing(run, 8), poll_s=3600).run_command()
    finally:
        signal.signal(READ_SIGNAL, before)
    reader.join(timeout=10)
    assert code == 0 and not tails  # no second reading of the output
    (exit_,) = kinds(run.path, "exit")
    assert exit_["step"] == 8, exit_


def test_an_orphaned_keepers_exit_and_end_have_the_last_step(tmp_path: Path) -> None:
    """With the supervisor dead, the keeper records the steps itself; its exit was written before it read the
    output's rest (and released the last line), so it lagged its own End."""
    run = _run(tmp_path, *_training())
    supervisor = _supervisor(run)
    supervisor.kill()
    supervisor.wait()
    code = Keeper(run, _printing(run, 8, wait_s=1.0), poll_s=0.05).run_command()
    assert code == 0
    (exit_,), (end,) = kinds(run.path, "exit"), kinds(run.path, "end")
    assert (exit_["step"], end["step"]) == (8, 8), (exit_, end)
