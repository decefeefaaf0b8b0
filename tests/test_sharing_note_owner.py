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


def test_a_shared_homes_run_list_is_neither_read_nor_written_by_another_user(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A HOME shared by two users (root and a useradd one, trial 16): root's `ls` listed the other's runs from
    their runs.list, and root's `run` appended its own runs to that file."""
    from loratui import userstate

    monkeypatch.setattr(userstate, "state_dir", lambda: tmp_path / "state")
    run = _live_run(tmp_path, monkeypatch)
    userstate.remember_run(run.path)
    assert userstate.remembered_runs() == [Path(os.path.realpath(run.path))]
    listed = (tmp_path / "state" / userstate.RUNS_LIST).read_bytes()
    me = os.getuid()
    monkeypatch.setattr(userstate.os, "getuid", lambda: me + 1)  # now the list and the run are another user's
    assert userstate.remembered_runs() == []
    userstate.remember_run(tmp_path / "mine")
    assert (tmp_path / "state" / userstate.RUNS_LIST).read_bytes() == listed


def test_a_listed_run_this_user_may_not_enter_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial 16: root had appended its run to the other user's list (a shared HOME); that user's `loratui ls` then
    ended with 'events.jsonl: Permission denied' on it, listing nothing."""
    from loratui import userstate

    monkeypatch.setattr(userstate, "state_dir", lambda: tmp_path / "state")
    run = _live_run(tmp_path, monkeypatch)
    userstate.remember_run(run.path)
    real = Path.is_file

    def refused(self: Path) -> bool:
        if self.parent == Path(os.path.realpath(run.path)):
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "is_file", refused)
    assert userstate.remembered_runs() == []
