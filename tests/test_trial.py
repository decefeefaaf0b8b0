"""What a newcomer's tmux trial of the README found outside the app (issue 26's trial)."""

from __future__ import annotations

import io

from loratui import events
from loratui.logic.runstate import RunState
from loratui.tui.headless import print_end
from tests import scenarios


def test_a_stopped_run_is_not_told_the_suspends_exit_code() -> None:
    """Suspended (`P`), then stopped: the headless end line said "stopped at step 37 (exit code 75)", the
    code of the suspend, read as a failure. A failed run still gets its exit code."""
    for end, said in ((events.End(t=scenarios.T0 + 999, state=events.STOPPED, exit_code=75, step=37),
                       "stopped at step 37\n"),
                      (events.End(t=scenarios.T0 + 999, state=events.FAILED, exit_code=1, step=37),
                       "failed at step 37 (exit code 1)\n")):
        state = RunState().feed_all(scenarios.run(37) + [end])
        out = io.StringIO()
        print_end(state, out)
        assert out.getvalue().splitlines(keepends=True)[0].endswith(said), out.getvalue()
