"""Trial 7, a run left alone with alerts: its trainer SIGKILLed at step 50, the supervisor's end record said step
0, so the first advice (panel, headless, doctor) and the `failed` alert read "killed by SIGKILL at step 0"."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.conftest import kinds, loratui, wait_for
from tests.test_run import _trainer_pid, _wait_step, start_and_reach

pytestmark = pytest.mark.slow


def test_a_killed_trainer_ends_at_the_step_it_reached(runs_dir: Path) -> None:
    viewer, run = start_and_reach(runs_dir, 5000, 4)
    pid = _trainer_pid(run)
    _wait_step(run, 6)
    os.kill(pid, signal.SIGKILL)
    viewer.communicate(timeout=300)
    end = wait_for(lambda: kinds(run, "end"), timeout=120)[0]  # type: ignore[index]
    reached = max(int(e["step"]) for e in kinds(run, "step"))  # type: ignore[call-overload]
    assert reached >= 6 and end["step"] == reached, (end, reached)
    doctor = loratui("doctor", str(run))
    assert f"killed by SIGKILL at step {reached}" in doctor.stdout, doctor.stdout
