"""What `doctor` and the app tell a user after Slurm ended the job must be what loratui does next.

Trial 10: a tiny run cancelled with scancel at step 5 (no checkpoint yet) was told "submit it again to go on
from its last checkpoint", but an ended run is never resumed: `loratui run` in the new job starts a new run
from step 0 (only a job Slurm itself requeued, whose run has no end, is adopted: cli._requeued_run)."""
from __future__ import annotations

import pytest

from loratui import events
from loratui.logic.advisor.failure import scheduler_advice


@pytest.mark.parametrize("cause", ["CANCELLED", "NODE_FAIL"])
def test_an_ended_job_is_not_said_to_go_on_from_its_checkpoint(cause: str) -> None:
    end = events.End(t=0.0, state=events.STOPPED if cause == "CANCELLED" else events.FAILED, step=5,
                     cause=cause, error=f"Slurm: job 213 {cause}: exit code 0:15")
    advice = scheduler_advice(end)
    said = " ".join([advice.title, *advice.evidence]).lower()
    assert "go on from" not in said and "from its last checkpoint" not in said, said
    assert "a new run from step 0" in said, said
