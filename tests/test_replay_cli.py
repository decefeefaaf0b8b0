"""`loratui replay` from the shell: the headless summary of a recorded run, compare, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

from loratui import rundir
from loratui.eventlog import EventWriter
from tests import scenarios
from tests.conftest import TINY, loratui


def _recorded(tmp_path: Path, name: str, found: list) -> Path:  # type: ignore[type-arg]
    settings = rundir.RunSettings(run_id=name, name=name, recipe_source=str(TINY))
    run = rundir.create(tmp_path / "runs", settings, TINY.read_text())
    writer = EventWriter(run.events)
    for event in found:
        writer.write(event)
    writer.close()
    return run.path


def test_headless_summary_of_a_failed_run(tmp_path: Path) -> None:
    path = _recorded(tmp_path, "oom", scenarios.failed_oom(30))
    result = loratui("replay", str(path), "--headless", "--summary")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["steps"] == 30 and summary["end_state"] == "failed"
    assert "oom_fragmentation" in summary["diagnoses"]
    assert summary["peak_device_used_gib"] > 30


def test_compare_summary_by_run_id(tmp_path: Path) -> None:
    _recorded(tmp_path, "a", scenarios.run(20))
    _recorded(tmp_path, "b", scenarios.nan_run())
    result = loratui("replay", "a", "b", "--headless", "--summary", "--runs-dir", str(tmp_path / "runs"))
    assert result.returncode == 0, result.stderr
    both = json.loads(result.stdout)
    assert both["a"]["nan_steps"] == [] and both["b"]["nan_steps"][0] == 35


def test_bad_targets_get_one_line(tmp_path: Path) -> None:
    for args in (["replay", str(tmp_path / "missing")], ["replay", "nope", "--runs-dir", str(tmp_path)],
                 ["replay", str(_recorded(tmp_path, "x", scenarios.run(2))), "--speed", "5000"]):
        result = loratui(*args, "--headless")
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
