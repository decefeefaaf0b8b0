"""A guarded run whose trainer is killed (SIGKILL, no Python error) and whose restarted trainer is killed again
before its first step (trial 10, an overnight run and `kill -9` twice).

The second death was judged "the restarted trainer failed again at step 0 (guard)": the step of a life that
had not stepped yet, and the guard's own account of its retry taken for the failure. So the crash-loop rule
(the same failure again with no new checkpoint) did not see the repeat, the transient retry was refused in
silence (the guard's advice counted as a Python error), and the run ended with no word on why it was not
retried (retry 1 of 2 spent)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, TINY, kinds, wait_for


def _recipe(tmp_path: Path) -> Path:
    text = TINY.read_text().replace("max_steps = 300", "max_steps = 200").replace("save_steps = 60", "save_steps = 2")
    text = text.replace('path = "data/', f'path = "{REPO}/recipes/data/')
    path = tmp_path / "guarded.toml"
    path.write_text(text + "\n[guard]\nenabled = true\n")
    return path


def _trainer_pid(run: Path) -> int:
    try:
        return int((run / "trainer.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


@pytest.mark.slow
def test_a_trainer_killed_again_before_its_first_step_is_a_crash_loop_at_the_checkpoints_step(
        tmp_path: Path, runs_dir: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "loratui", "run", str(_recipe(tmp_path)), "--headless",
                             "--runs-dir", str(runs_dir)], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        run = wait_for(lambda: runs_dir.is_dir() and next((p for p in runs_dir.iterdir() if p.is_dir()), None))
        assert isinstance(run, Path)
        wait_for(lambda: len(kinds(run, "checkpoint")) >= 2, timeout=300)
        first = _trainer_pid(run)
        os.kill(first, signal.SIGKILL)
        second = wait_for(lambda: (pid := _trainer_pid(run)) != first and pid, timeout=300)
        os.kill(int(second), signal.SIGKILL)  # while it loads: long before its first step
        wait_for(lambda: kinds(run, "end"), timeout=300)
    finally:
        proc.kill()  # the viewer only: the runs_dir fixture ends a supervisor or trainer left behind
        proc.wait(timeout=60)
    resumed = [e for e in kinds(run, "train_begin")]
    assert len(resumed) == 1, resumed  # the second life never began training
    retry = next(str(e["message"]) for e in kinds(run, "notice") if e.get("key") == "guard_retry")
    checkpoint = retry.rsplit("checkpoint-", 1)[1]
    verdicts = [str(e["message"]) for e in kinds(run, "notice") if e.get("key") == "guard_verdict"]
    assert verdicts[0] == (f"guard verdict: NOT recovered: the restarted trainer failed again at step {checkpoint} "
                           "(exit -9)"), verdicts
    assert verdicts[1].startswith("crash loop: ") and "exit -9" in verdicts[1], verdicts  # told why it stops
    assert verdicts[1].endswith("; not restarting again"), verdicts
    assert kinds(run, "end")[-1]["state"] == "failed"
