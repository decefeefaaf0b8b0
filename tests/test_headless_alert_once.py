"""`run --headless` says each thing once: the supervisor records an alert as its own notice beside the notice
it was raised for (trial 10, a Slurm job's log printed "notice: the run will not finish before the time
limit: ..." and then "notice: Slurm time limit: the run will not finish ..." again)."""
from __future__ import annotations

import io
from pathlib import Path

from loratui import events
from loratui.tui.headless import follow
from tests.conftest import write_run

SAID = ("the run will not finish before the time limit: at this pace it needs 9m52s more (step 4/300), and Slurm "
        "ends job 213 in 9m42s (at 13:10:07); set [slurm] save_before_limit (or --save-before-limit) to save a "
        "checkpoint before it")


def test_an_alert_that_repeats_a_notice_is_printed_once(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", [
        events.Header(t=1.0, schema=1, run_id="r1", recipe_hash="h", name="r1"),
        events.Notice(t=2.0, level="warning", key="time_limit", message=SAID),
        events.Notice(t=2.1, level="info", key="alert", message="Slurm time limit: " + SAID),
        events.Notice(t=2.2, level="error", key="alert", message="hung: no step for 10 minutes"),
        events.End(t=3.0, state=events.STOPPED, step=5, cause="CANCELLED", error="Slurm: job 213 CANCELLED"),
    ])
    out = io.StringIO()
    follow(run, out=out, poll_s=0.0)
    printed = out.getvalue()
    assert printed.count("the run will not finish before the time limit") == 1, printed
    assert "notice: hung: no step for 10 minutes" in printed  # an alert with no notice of its own is said
