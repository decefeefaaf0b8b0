"""A stopped launcher's own exit code: `loratui run -- torchrun ... script.py` with no hooked Trainer is stopped by
SIGTERM to torchrun (its ranks run in sessions of their own, so only the agent gets it); the agent terminates its
ranks and leaves with 1 (its SignalException), and the run the user had stopped was recorded `failed` (3 runs of 3,
exit code 1; the owner counted only STOPPED_CODES as a stop). A stop whose signal reached the running command
explains any exit code; a command that had exited before the stop keeps its failure.

The launcher here is a stand-in that leaves as torchrun does on SIGTERM: exit code 1. The keeper's `exit` (the run's
end should the supervisor die before its End) says the same as the End: the supervisor tells it that its stop's signal
reached the command (`command.STOPPED_SIGNAL`), and a hooked Trainer's stop is in control.cmds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from loratui import events, rundir
from loratui.supervisor import command as watched
from loratui.supervisor import control
from tests.conftest import TINY, kinds, loratui, only_run, wait_for, watched_pids
from tests.test_alerts import _supervisor
from tests.test_dead_supervisor import _kill_supervisor

LAUNCHER = """
import signal, sys, time

def on_term(*_):  # torchrun's agent: its ranks terminated, it leaves with 1
    print("Received 15 death signal, shutting down workers", file=sys.stderr, flush=True)
    sys.exit(1)

signal.signal(signal.SIGTERM, on_term)
for step in range(1, 100000):
    print(f"step {step} loss 1.0", flush=True)
    time.sleep(0.2)
"""


def _start(runs: Path) -> tuple[subprocess.Popen[str], Path]:
    viewer = subprocess.Popen([sys.executable, "-m", "loratui", "run", "--headless", "--runs-dir", str(runs), "--",
                               sys.executable, "-c", LAUNCHER], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    wait_for(lambda: runs.exists() and any(runs.iterdir()))
    run = only_run(runs)
    wait_for(lambda: kinds(run, "step"))  # running, its pid recorded by its keeper
    return viewer, run


def _stop(runs: Path) -> None:
    said = loratui("stop", "--runs-dir", str(runs))
    assert said.returncode == 0, said.stdout + said.stderr


def _cleanup(viewer: subprocess.Popen[str], run: Path) -> None:
    for pid in watched_pids(run):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if viewer.poll() is None:
        viewer.kill()
        viewer.wait()


def test_a_launcher_that_exits_1_on_the_stops_sigterm_ends_stopped(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    viewer, run = _start(runs)
    try:
        _stop(runs)
        out, _ = viewer.communicate(timeout=120)
        (end,) = kinds(run, "end")
        assert end["state"] == events.STOPPED and end["exit_code"] == 1, (end, out[-2000:])
        assert not end.get("error"), end  # no failure's stderr as its error
        (exited,) = kinds(run, "exit")  # its keeper's word, which stands if we die before the End: the same
        assert exited["state"] == events.STOPPED and exited["exit_code"] == 1, exited
        assert viewer.returncode == 0, out[-2000:]  # a run stopped on request, as `loratui run` says it
    finally:
        _cleanup(viewer, run)


def test_the_keeper_of_a_dead_supervisor_ends_a_stopped_launcher_stopped(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    viewer, run = _start(runs)
    try:
        _kill_supervisor(run)
        wait_for(lambda: any(e.get("key") == "supervisor_lost" for e in kinds(run, "notice")), timeout=30)
        _stop(runs)  # no supervisor answers: written to control.cmds, which the keeper obeys by SIGTERM
        wait_for(lambda: kinds(run, "end"), timeout=60)
        (end,) = kinds(run, "end")
        (exited,) = kinds(run, "exit")
        assert end["state"] == events.STOPPED and end["exit_code"] == 1, end
        assert exited["state"] == events.STOPPED, exited
    finally:
        _cleanup(viewer, run)


def _command_run(tmp_path: Path) -> rundir.RunDir:
    settings = rundir.RunSettings(run_id="20270115-093000-launch", name="launch", recipe_source="",
                                  command=[sys.executable, "-c", LAUNCHER], cwd=str(tmp_path))
    return rundir.create(tmp_path / "runs", settings, TINY.read_text())


@pytest.mark.parametrize("crashed_first", [True, False])
def test_only_a_stop_whose_signal_reached_the_command_explains_its_exit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crashed_first: bool) -> None:
    """The command (its keeper's child, in a group of its own) exits 1: on the stop's SIGTERM, a stop; having crashed
    before the stop came (its keeper still waiting), a failure, whatever the user asked after."""
    run = _command_run(tmp_path)
    sup = _supervisor(run, monkeypatch)
    sent: list[bool] = []
    real = watched.stop_signals
    monkeypatch.setattr(watched, "stop_signals", lambda *args: sent.append(real(*args)) or sent[-1])
    command = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, process_group=0)
    keeper = subprocess.Popen(["sleep", "120"])  # the command's parent, alive until the test ends
    try:
        assert command.stdout is not None and command.stdout.readline() == b"step 1 loss 1.0\n"  # its handler is set
        rundir.write_pidfile(run.trainer_pidfile, command.pid)
        assert run.trainer_pid() == command.pid
        if crashed_first:
            command.kill()
            command.wait()
        sup.trainer, sup.state = keeper, events.TRAINING
        assert sup._handle(control.Request("stop", "cli")) is None
        wait_for(lambda: sent, timeout=30)  # the stop's signal was tried
        assert sent == [not crashed_first]
        code = 1 if crashed_first else command.wait(timeout=30)
        assert code == 1  # the launcher's own word after SIGTERM
        assert sup._stop_explains(code) is not crashed_first
    finally:
        for proc in (command, keeper):  # the keeper's end lets the stop's thread go
            proc.kill()
            proc.wait()
        if command.stdout is not None:
            command.stdout.close()
        sup.unattended.close()
        sup.log.close()


HOOKED = """
import sys, time
from pathlib import Path
commands = Path(sys.argv[1])
print("ready", flush=True)
while "stop" not in (commands.read_text() if commands.exists() else ""):  # a hooked Trainer, at its step boundaries
    time.sleep(0.05)
"""


def test_the_keeper_of_a_hooked_trainer_stopped_by_a_live_supervisor_says_stopped(tmp_path: Path) -> None:
    """The supervisor relays a hooked Trainer's stop through control.cmds, and the Trainer leaves with 0: its keeper's
    `exit` said `finished` beside the supervisor's stopped End, and would have stood as the run's end had the
    supervisor died between the two."""
    run = _command_run(tmp_path)
    rundir.write_pidfile(run.pidfile, os.getpid())  # the supervisor, alive
    run.hooked.write_text("{}", encoding="utf-8")
    keeper = subprocess.Popen([sys.executable, "-m", "loratui.supervisor.keeper", str(run.path), "--", sys.executable,
                               "-c", HOOKED, str(run.commands)], stdout=subprocess.PIPE, text=True)
    try:
        assert keeper.stdout is not None and keeper.stdout.readline() == "ready\n"
        run.append_command("stop")  # as the supervisor's _relay
        assert keeper.wait(timeout=60) == 0
        (exited,) = kinds(run.path, "exit")
        assert exited["state"] == events.STOPPED and exited.get("exit_code", 0) == 0, exited  # (0 unwritten)
    finally:
        if keeper.poll() is None:
            keeper.kill()
        keeper.wait()
        if keeper.stdout is not None:
            keeper.stdout.close()
