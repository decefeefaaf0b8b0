"""A plain loop's step times are the time the program took, not the reader's poll gaps. Several `step N loss X`
lines read in one poll (a loaded machine, a supervisor held up) were read one by one at one instant: the first took
the whole gap and the rest nothing (a loop printing every 0.5 s, its supervisor stopped 3 s: 3.04 s, then 0.002, 0,
0, 0, 0 s). Lines read together share the time between the last step's write and their last write (the file's
mtime); how that time split between them is not knowable, so the split is the even one and the sum is true."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from loratui import events, rundir
from loratui.supervisor.watch_output import OutputWatcher
from tests.conftest import kinds, wait_for
from tests.test_watch_runs import _run, _start, _wait_step, watch_dir  # noqa: F401 - fixtures


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _times(found: list[events.AnyEvent]) -> list[tuple[int, float]]:
    return [(e.step, round(e.step_time, 3)) for e in found if isinstance(e, events.Step)]


def test_lines_read_together_share_the_time_since_the_last_steps_write() -> None:
    clock = _Clock()
    watcher = OutputWatcher(clock=clock)
    found: list[events.AnyEvent] = []
    for step in range(1, 4):  # one line a read, each read as written
        clock.now += 0.5
        found += watcher.feed_lines([f"step {step} loss {3 - step / 10}"], written=clock.now)
    clock.now += 3.0  # the reader was held up: steps 4-9 were written 0.5 s apart, step 9 at 1004.5
    found += watcher.feed_lines([f"step {step} loss {3 - step / 10}" for step in range(4, 10)], written=1004.5)
    clock.now += 1.0
    found += watcher.close()  # the last line, held back by the reader, is released at the end
    steps = [e for e in found if isinstance(e, events.Step)]
    assert _times(found) == [(1, 0.0)] + [(step, 0.5) for step in range(2, 10)], _times(found)
    assert [round(e.t - 1000, 3) for e in steps][1:] == [1.5 + 0.5 * k for k in range(8)]  # placed apart, not at once
    assert all(e.t <= clock.now for e in steps)


def test_a_line_that_advances_several_steps_gives_each_its_own_time() -> None:
    """A loop printing every other step (`step 2`, `step 4`...) every 0.5 s: each step took 0.25 s. Step.step_time is
    one step's time; the share times the steps advanced (0.5 s) counted every advance twice after a pause (the slow
    lane's SIGSTOP test: 9.9 s of steps in 7.1 s)."""
    clock = _Clock()
    watcher = OutputWatcher(clock=clock)
    found: list[events.AnyEvent] = []
    for step in range(2, 12, 2):
        clock.now += 0.5
        found += watcher.feed_lines([f"step {step} loss 1.0"], written=clock.now)
    assert _times(found)[1:] == [(step, 0.25) for step in range(4, 10, 2)], _times(found)


def test_a_hold_counts_only_between_the_writes_it_falls_between() -> None:
    """A line written before a SIGSTOP and read after it took no part of the hold."""
    clock = _Clock()
    watcher = OutputWatcher(clock=clock)
    found: list[events.AnyEvent] = []
    for step in range(1, 4):
        clock.now += 1.0
        found += watcher.feed_lines([f"step {step} loss 1.0"], written=clock.now)
    written = clock.now + 1.0  # step 4 written, then the command held 10 s before the read
    clock.now += 1.2
    watcher.hold()
    clock.now += 10.0
    watcher.release()
    found += watcher.feed_lines(["step 4 loss 1.0"], written=written)  # releases step 3
    clock.now += 1.0
    found += watcher.feed_lines(["step 5 loss 1.0"], written=clock.now)  # releases step 4: 11.2 s, 10 of them held
    assert _times(found) == [(1, 0.0), (2, 1.0), (3, 1.0), (4, 1.2)], _times(found)


SCRIPT = """import time
for i in range(1, 15):
    time.sleep(0.3)
    print(f"step {i} loss {3 - i / 20:.3f}", flush=True)
"""


@pytest.mark.slow
def test_a_held_up_reader_records_the_programs_step_times(watch_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    script = tmp_path / "loop.py"
    script.write_text(SCRIPT)
    viewer = _start(watch_dir, sys.executable, str(script), cwd=tmp_path)
    run = _run(watch_dir)
    _wait_step(run, 2, timeout=60)
    pid = rundir.RunDir(run).supervisor_pid()
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # the reader is held up; the program prints on
    time.sleep(2.0)
    os.kill(pid, signal.SIGCONT)
    wait_for(lambda: kinds(run, "end"), timeout=60)
    viewer.wait(timeout=30)
    times = {int(e["step"]): float(e["step_time"]) for e in kinds(run, "step")}  # type: ignore[arg-type]
    assert sorted(times) == list(range(1, 15))
    # 0.3 s a step as printed (a loaded box may stretch a sleep; none is near 0, none holds the 2 s)
    assert all(0.2 <= times[step] <= 0.9 for step in range(2, 15)), times
