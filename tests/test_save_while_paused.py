"""`s` while paused saves at the held step boundary and stays paused (issue 16 item 11)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import kinds, loratui, wait_for
from tests.test_run import start_and_reach

pytestmark = pytest.mark.slow


def test_save_while_paused_writes_the_checkpoint_now_and_keeps_the_pause(runs_dir: Path) -> None:
    viewer, run = start_and_reach(runs_dir, max_steps=40, step=2)
    loratui("pause", "--runs-dir", str(runs_dir))
    wait_for(lambda: any(e["state"] == "paused" for e in kinds(run, "state")), timeout=120)
    held_at = max(int(e["step"]) for e in kinds(run, "step"))  # type: ignore[call-overload]
    assert loratui("save", "--runs-dir", str(runs_dir)).returncode == 0
    wait_for(lambda: (run / "checkpoints" / f"checkpoint-{held_at}").is_dir(), timeout=120)
    time.sleep(2.0)
    assert max(int(e["step"]) for e in kinds(run, "step")) == held_at  # type: ignore[call-overload]
    assert [e["state"] for e in kinds(run, "state")][-1] == "paused"
    loratui("stop", "--runs-dir", str(runs_dir))
    wait_for(lambda: kinds(run, "end"), timeout=120)
    viewer.kill()
