"""Trial 12, `loratui run -- python missing.py` (a typo in the script's name): the run ended with `advice: The
trainer exited with code 2 at step 0`, though no trainer of loratui's ran: the user's command did. A SIGKILLed
watched command's end said "the trainer was killed by SIGKILL" from a live supervisor and "the command was killed
by SIGKILL" from its keeper, and only the first was taken for the reason of the failure. A recipe run's trainer
is still "the trainer"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from loratui import events
from loratui.logic.advisor import Advisor
from loratui.tui import failure
from tests import scenarios
from tests.conftest import kinds, loratui, only_run


def _watched(end: events.End, command: list[str] | None) -> list[events.AnyEvent]:
    return [events.Header(t=scenarios.T0, schema=1, run_id="20270115-093000-missing", recipe_hash="abc",
                          name="missing", command=command or [], controls=["stop"] if command else []),
            events.State(t=scenarios.T0, state=events.STARTING),
            events.Output(t=scenarios.T0 + 0.1, stream="stderr",
                          lines=["python: can't open file '/tmp/missing.py': [Errno 2] No such file or directory"]),
            end]


def test_a_watched_commands_exit_is_the_commands() -> None:
    end = events.End(t=scenarios.T0 + 0.2, state=events.FAILED, exit_code=2, step=0)
    items = Advisor(None).feed_all(_watched(end, ["python", "missing.py"])).items()
    assert items[0].title == ("The command exited with code 2 at step 0: Python cannot open /tmp/missing.py "
                              "(no such file)"), items[0].title  # trial 13: the exit code alone said nothing
    assert items[0].evidence[-1] == ("next: check the script's name and the directory the command runs in (its path "
                                     "is taken from there)")
    items = Advisor(None).feed_all(_watched(end, None)).items()  # a recipe run
    assert items[0].title.startswith("The trainer exited with code 2 at step 0: "), items[0].title


def test_a_command_that_failed_otherwise_points_at_its_last_lines() -> None:
    found = _watched(events.End(t=scenarios.T0 + 0.2, state=events.FAILED, exit_code=1, step=0), ["python", "x.py"])
    found[2] = events.Output(t=scenarios.T0 + 0.1, stream="stderr", lines=["/venv/bin/python: No module named x"])
    items = Advisor(None).feed_all(found).items()
    assert items[0].title == "The command exited with code 1 at step 0", items[0].title
    assert items[0].evidence[-1] == "next: the command's last lines are above; the full output is in the run directory"


def test_a_killed_commands_line_is_the_reason_whoever_wrote_it() -> None:
    for who in ("command", "trainer"):
        error = f"the {who} was killed by SIGKILL\nstep 12 loss 0.5\nUserWarning: late"
        end = events.End(t=1.0, state=events.FAILED, exit_code=-9, signal="SIGKILL", error=error)
        assert failure.reason(end) == f"the {who} was killed by SIGKILL"


def test_a_supervisor_says_a_killed_watched_command_was_the_command(tmp_path: Path) -> None:

    runs = tmp_path / "runs"
    code = "import os, signal; print('step 1 loss 1.0', flush=True); os.kill(os.getpid(), signal.SIGKILL)"
    done = loratui("run", "--headless", "--runs-dir", str(runs), "--", sys.executable, "-c", code,
                   stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr
    end = kinds(only_run(runs), "end")[-1]
    assert str(end["error"]).startswith("the command was killed by SIGKILL"), end
    assert "The command was killed by SIGKILL at step 1" in done.stdout + done.stderr
