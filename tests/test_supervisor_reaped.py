"""Trial 12: the viewer of `loratui run -- python train.py` kept its supervisor as a zombie (`[python3] <defunct>`
in `ps`, for as long as the finished run's screen stayed open: 17 minutes there); `spawn_supervisor` started it
and never waited for it. An MCP server or a viewer that resumes runs (`r`, `loratui resume` through the agent)
gathered one such zombie per supervisor that ended. The process that starts a supervisor now reaps it."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from loratui import rundir
from loratui.supervisor import launch


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return ""  # gone: reaped


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_supervisor_that_ends_after_its_start_is_reaped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A stand-in supervisor: it writes the log's first line (so spawn_supervisor returns at once), then ends later.
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\necho \'{"kind":"header"}\' > "$3/events.jsonl"\nsleep 0.5\n')
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake))
    run = rundir.RunDir(tmp_path / "runs" / "20270115-093000-train")
    run.path.mkdir(parents=True)
    pid = launch.spawn_supervisor(run)
    assert _state(pid) not in ("", "Z")  # still running when the start returned
    deadline = time.monotonic() + 10
    while _state(pid) not in ("", "Z") and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # time for the reaper
    assert _state(pid) == "", f"supervisor {pid} left as a zombie of pid {os.getpid()}"
