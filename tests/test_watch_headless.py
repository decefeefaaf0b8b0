"""`loratui run --headless -- COMMAND` prints progress only: it says where the command's own output went
(issue 24 item 7)."""

from __future__ import annotations

import io
from pathlib import Path

from loratui import events, rundir
from loratui.eventlog import EventWriter
from loratui.tui.headless import follow


def _finished_run(tmp_path: Path, command: list[str]) -> rundir.RunDir:
    settings = rundir.RunSettings(run_id="20270115-093000-train", name="train", recipe_source="",
                                  recipe_dir=str(tmp_path), command=command, cwd=str(tmp_path))
    run = rundir.create(tmp_path / "runs", settings, "[monitor]\nwarn_gb = 30.0\n")
    log = EventWriter(run.events)
    log.write(events.Header(t=1.0, schema=1, run_id=run.run_id, recipe_hash="", name="train", command=command))
    log.write(events.End(t=2.0, state=events.FINISHED, exit_code=0, step=3))
    log.close()
    return run


def test_headless_says_where_a_watched_commands_output_went(tmp_path: Path) -> None:
    run = _finished_run(tmp_path, ["python", "train.py"])
    out = io.StringIO()
    follow(run, out=out, poll_s=0.01)
    text = out.getvalue()
    assert f"the command's own output goes to {run.stdout_log}" in text, text
    assert "trainer.stderr.log" in text and text.count("own output goes to") == 1


def test_a_recipe_runs_headless_view_does_not(tmp_path: Path) -> None:
    run = _finished_run(tmp_path, [])
    out = io.StringIO()
    follow(run, out=out, poll_s=0.01)
    assert "own output" not in out.getvalue()
