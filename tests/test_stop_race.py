"""A stop sent as the trainer ends (its SIGTERM, sent at once beside the relay, ended a trainer still loading
before the relay looked) is done, not refused: `loratui stop` said "the trainer is not running" while the run
stopped (test_run.py::test_stop_while_loading_ends_at_once failed on it now and then)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from loratui.supervisor import control
from tests.test_alerts import _supervisor, _tiny_run


def test_a_stop_that_finds_the_trainer_gone_is_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sup = _supervisor(_tiny_run(tmp_path), monkeypatch)
    try:
        sup.trainer = subprocess.Popen(["true"])  # a real trainer process, ended as the stop arrives
        sup.trainer.wait()
        assert sup._handle(control.Request("stop", "cli")) is None and sup.stop_requested
        assert sup._handle(control.Request("pause", "cli")) == "the trainer is not running"  # others: refused
    finally:
        sup.unattended.close()
        sup.log.close()
