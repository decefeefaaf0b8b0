"""`loratui replay` from the shell: the headless summary of a recorded run, compare, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

from loratui import events, rundir
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


def test_summary_prints_json_and_headless_prints_progress(tmp_path: Path) -> None:
    path = _recorded(tmp_path, "r", scenarios.run(30, max_steps=30) + [_end(30)])
    summary = loratui("replay", str(path), "--summary")
    assert summary.returncode == 0, summary.stderr
    assert json.loads(summary.stdout)["steps"] == 30
    headless = loratui("replay", str(path), "--headless", "--from", "12")
    assert headless.returncode == 0, headless.stderr
    lines = headless.stdout.splitlines()
    assert not headless.stdout.startswith("{") and "step 12/30" in lines[0]  # --from is honoured
    assert "step 30/30" in lines[-2] and lines[-1].endswith(": finished at step 30")


def _end(step: int) -> events.End:
    return events.End(t=scenarios.T0 + 10_000, state=events.FINISHED, exit_code=0, step=step)


def test_from_outside_the_run_is_refused_with_the_range(tmp_path: Path) -> None:
    path = _recorded(tmp_path, "r", scenarios.run(30))
    for step in ("31", "-1"):
        result = loratui("replay", str(path), "--headless", "--from", step)
        assert result.returncode == 2 and f"--from {step}: " in result.stderr and "steps 0 to 30" in result.stderr
    both = loratui("replay", str(path), "--summary", "--from", "3")
    assert both.returncode == 2 and "--from 3" in both.stderr and "Traceback" not in both.stderr


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = _recorded(tmp_path, "r", scenarios.run(30))
    proc = subprocess.Popen([sys.executable, "-m", "loratui", "replay", str(path), "--summary"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # `| head -1` gone before the summary is written
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 0 and err == "", err


def test_compare_names_two_runs_of_one_name_a_and_b_with_ids(tmp_path: Path) -> None:
    from loratui.commands.replay import _open, compare_runs

    runs = tmp_path / "runs"
    for run_id in ("20270101-000000-same", "20270102-000000-same"):
        settings = rundir.RunSettings(run_id=run_id, name="same", recipe_source=str(TINY))
        run = rundir.create(runs, settings, TINY.read_text())
        writer = EventWriter(run.events)
        for event in scenarios.run(5):
            writer.write(event if not isinstance(event, events.Header) else
                         events.Header(t=event.t, schema=1, run_id=run_id, recipe_hash="h", name="same"))
        writer.close()
    a, b = (_open(run_id, runs) for run_id in ("20270101-000000-same", "20270102-000000-same"))
    state, title = compare_runs(a, b)
    assert state.name == "B same (20270102-000000-same)"
    assert title == "A same (20270101-000000-same) · B same (20270102-000000-same)"


def test_without_a_terminal_replay_prints_progress_as_attach_does(tmp_path: Path) -> None:
    """The trial: `loratui replay RUN` with its output to a file (or under a script) started the app anyway: it
    wrote the screen's escape codes into the file and never ended. Without a terminal it now prints the
    headless lines, as `run` and `attach` do."""
    path = _recorded(tmp_path, "piped", scenarios.run(20))
    import subprocess

    try:
        result = loratui("replay", str(path), timeout=120, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"replay without a terminal did not end: {str(exc.output)[:300]!r}") from None
    assert result.returncode == 0, result.stderr
    assert "\x1b[" not in result.stdout and "step 20" in result.stdout, result.stdout[:500]
