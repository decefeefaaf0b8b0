"""A plain loop whose supervisor is killed with SIGKILL during its second phase (its printed count started again at
step 1, counted on after the first phase's steps: loratui/phases.py): the keeper that records the rest of its output
goes on on the run's step axis. Its reader started fresh: the second phase's printed step 9 was recorded as the run's
step 9 after step 15 (its curve folded back over the first phase's), with no Step, the End said step 15 of 20, and the
lines printed between the supervisor's last read and the keeper's first (up to a poll) were never recorded."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from loratui import events
from loratui.eventlog import EventWriter
from loratui.rundir import RunDir
from loratui.supervisor.keeper import Keeper
from loratui.supervisor.watch_output import OutputWatcher
from tests.conftest import kinds

PHASES = [[f"step {n} loss {3 - n / 10:.2f}" for n in range(1, 11)],
          [f"step {n} loss {1.5 - n / 20:.2f}" for n in range(1, 11)]]
PRINTED = PHASES[0] + PHASES[1]


def _supervised(tmp_path: Path, read: int, printed: int) -> RunDir:
    """A run whose supervisor read the command's first `read` lines (recording its steps and the lines as owner.py
    does: the reader's events, then the Output) and died; the command had printed `printed` lines by then."""
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    run.stderr_log.touch()
    run.stdout_log.write_text("".join(line + "\n" for line in PRINTED[:printed]))
    log, watcher = EventWriter(run.events), OutputWatcher()
    log.write(events.Header(t=time.time(), schema=events.SCHEMA_VERSION, run_id="run", recipe_hash="h",
                            command=["python", "loop.py"]))
    for line in PRINTED[:read]:
        for event in watcher.feed(line):
            log.write(event)
        log.write(events.Output(t=time.time(), stream="stdout", lines=[line]))
    log.close()
    return run


def test_a_keeper_goes_on_with_the_second_phase_on_the_runs_step_axis(tmp_path: Path) -> None:
    run = _supervised(tmp_path, read=16, printed=18)  # phase 2's step 6 read (its loss line held), 7-8 printed since
    rest = "".join(line + "\n" for line in PRINTED[18:])
    command = [sys.executable, "-c", f"import time; time.sleep(1); open({str(run.stdout_log)!r}, 'a').write({rest!r})"]
    assert Keeper(run, command, poll_s=0.05).run_command() == 0
    logs = [(e["step"], e["values"]["loss"]) for e in kinds(run.path, "log")]
    expected = [(n, float(line.split()[-1])) for n, line in enumerate(PRINTED, 1)]
    assert logs == expected, logs
    steps = [e["step"] for e in kinds(run.path, "step")]
    assert steps == list(range(1, 21)), steps
    recorded = [line for e in kinds(run.path, "output") if e["stream"] == "stdout" for line in e["lines"]]
    assert recorded == PRINTED  # each printed line once: none lost between the reads, none read twice
    (exit_,), (end,) = kinds(run.path, "exit"), kinds(run.path, "end")
    assert exit_["step"] == end["step"] == 20, (exit_, end)
    assert len(kinds(run.path, "train_begin")) == 2  # the first phase's and the second's, no third from the keeper


def test_a_pause_the_keeper_obeys_is_no_steps_time(tmp_path: Path) -> None:
    """`loratui pause`/`resume` of a plain loop whose supervisor died: the keeper holds the command by SIGSTOP, and the
    held time is left out of the step it interrupted, as the supervisor leaves it out (the step after a 3 s hold of a
    0.3 s loop was recorded taking 4.26 s)."""
    run = _supervised(tmp_path, read=0, printed=0)
    loop = "import time\nfor n in range(1, 13):\n    print(f'step {n} loss {3 - n / 10:.2f}', flush=True)\n" \
           "    time.sleep(0.2)\n"
    command = [sys.executable, "-c", f"import sys; sys.stdout = open({str(run.stdout_log)!r}, 'a')\n{loop}"]

    def commands() -> None:
        time.sleep(1.0)
        run.commands.write_text("pause\n")
        time.sleep(2.0)
        run.commands.write_text("pause\nresume\n")

    sender = threading.Thread(target=commands, daemon=True)
    sender.start()
    assert Keeper(run, command, poll_s=0.05).run_command() == 0
    sender.join()
    assert [e["state"] for e in kinds(run.path, "state") if e["state"] in (events.PAUSED, "training")][-2:] == \
        [events.PAUSED, "training"]
    times = [e["step_time"] for e in kinds(run.path, "step")]
    assert len(times) == 12 and max(times) < 1.0, times


def test_a_rotated_output_file_is_read_from_after_the_last_recorded_line(tmp_path: Path) -> None:
    """The supervisor rotates an output file past 64 MiB (copytruncate): the file then holds fewer lines than the log
    recorded from it, and the keeper goes on after the last recorded line found in it, else from its start."""
    from loratui.supervisor.keeper import _after_lines

    output = tmp_path / "trainer.stdout.log"
    output.write_bytes(b"step 7 loss 2.3\nstep 8 loss 2.2\nstep 9 loss 2.1\n")
    assert _after_lines(output, 2, "step 8 loss 2.2") == len(b"step 7 loss 2.3\nstep 8 loss 2.2\n")  # as recorded
    assert _after_lines(output, 5000, "step 8 loss 2.2") == len(b"step 7 loss 2.3\nstep 8 loss 2.2\n")  # rotated
    assert _after_lines(output, 5000, "step 6 loss 2.4") == 0  # all it holds came after the rotation
