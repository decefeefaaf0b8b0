"""`loratui run` notes the live runs it starts beside; on a runs or state directory shared by several users (root
reads every 0700 run) it named other users' runs and their states. Only this user's own runs are named now."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from loratui import cli, rundir, runstatus


def _live_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> rundir.RunDir:
    settings = rundir.RunSettings(run_id="20261206-070000-theirs", name="theirs", recipe_source="", recipe_dir="")
    run = rundir.create(tmp_path / "runs", settings, "")
    run.events.touch()
    monkeypatch.setattr(runstatus, "read", lambda r: runstatus.Status(state="training", alive="supervisor"))
    return run


def test_this_users_live_run_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _live_run(tmp_path, monkeypatch)
    assert run.run_id in [r.run_id for r, _ in cli.others_running(tmp_path / "runs")]


def test_another_users_live_run_is_not_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _live_run(tmp_path, monkeypatch)
    me = os.getuid()
    monkeypatch.setattr(cli.os, "getuid", lambda: me + 1)  # the run directory is now another user's
    assert run.run_id not in [r.run_id for r, _ in cli.others_running(tmp_path / "runs")]
