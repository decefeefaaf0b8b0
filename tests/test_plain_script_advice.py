"""A plain watched script (`loratui run -- python s.py`) sets its own learning rate, which loratui never sees:
advice to lower it says so, and names neither a value nor a recipe key it does not know."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from loratui import events
from loratui.logic.advisor import Advisor
from tests.conftest import loratui, only_run

SCRIPT = Path(__file__).parent / "data" / "scripts" / "lr_too_high.py"
HONEST = "lower the learning rate your script sets, e.g. to a third of it (loratui does not know its value)"


def _said(advice: list) -> str:  # type: ignore[type-arg]
    return "\n".join(a.title for a in advice)


def test_a_nan_in_a_plain_script_asks_for_the_scripts_own_learning_rate() -> None:
    """The events of a watched plain loop: a header naming the command, losses printed then NaN."""
    log = [events.Header(t=0.0, schema=1, run_id="r", recipe_hash="", command=["python", "s.py"])]
    log += [events.Log(t=float(s), step=s, values={"loss": v}) for s, v in
            enumerate([2.31, 2.12, 1.98, 1.90, float("nan")], start=1)]
    (advice,) = Advisor().feed_all(log).items()
    assert advice.id == "nan_loss" and advice.title == f"Loss became nan at step 5: {HONEST}", advice.title
    assert advice.change == {} and "learning_rate" not in advice.title


def test_a_rate_the_script_logged_is_quoted_as_logged() -> None:
    """A script that logs its learning rate: the value it logged is a measured fact, said as such."""
    log = [events.Header(t=0.0, schema=1, run_id="r", recipe_hash="", command=["python", "s.py"])]
    log += [events.Log(t=float(s), step=s, values={"loss": v, "learning_rate": 0.5}) for s, v in
            enumerate([2.31, 2.12, 1.98, 1.90, float("nan")], start=1)]
    (advice,) = Advisor().feed_all(log).items()
    said = HONEST.replace("loratui does not know its value", "its last log said 0.5")
    assert advice.title == f"Loss became nan at step 5: {said}", advice.title


@pytest.mark.slow
def test_a_real_watched_loop_whose_loss_turns_nan(runs_dir: Path) -> None:
    """The real thing: `loratui run --headless -- python lr_too_high.py`, then `doctor` on its run."""
    result = loratui("run", "--headless", "--runs-dir", str(runs_dir), "--run-name", "nan", "--", sys.executable, str(SCRIPT))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    doctor = loratui("doctor", str(only_run(runs_dir)))
    assert "Loss became inf at step 17: " + HONEST in doctor.stdout, doctor.stdout
    assert "learning_rate" not in doctor.stdout, doctor.stdout
