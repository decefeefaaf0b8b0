"""A suspended run whose supervisor died is re-adopted by `loratui resume`, often from another shell (a new SSH
session the next morning). The new supervisor was started from that shell and gave the command its environment:
a variable the run was started with (`CUDA_VISIBLE_DEVICES`, `HF_HOME`; here FIRST_ONLY) was gone from the resumed
program, and one set only in the resuming shell (RESUME_ONLY) was in it. The first supervisor keeps the user's
environment (`RunDir.first_env`, 0600, in the user's state directory) and a re-adopting one starts the command in it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loratui import events
from tests.conftest import REPO, kinds, loratui, wait_for
from tests.test_dead_supervisor import _kill_supervisor
from tests.test_watch_orphan import _status
from tests.test_watch_runs import ENV, _run, _seed, _wait_step, model_dir, watch_dir  # noqa: F401 - fixtures

pytestmark = pytest.mark.slow

PROBE = """import json, os, runpy, sys
with open(sys.argv[1], "a") as out:
    out.write(json.dumps(dict(os.environ)) + "\\n")
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _first_env(run: Path) -> Path:
    """Where the run's processes keep its first environment (their state directory is ENV's, not this process's)."""
    code = f"from loratui import rundir; print(rundir.RunDir(__import__('pathlib').Path({str(run)!r})).first_env)"
    return Path(subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, check=True,
                               cwd=REPO).stdout.strip())


def test_a_run_resumed_by_a_new_supervisor_gets_the_environment_it_began_with(
        model_dir: Path, watch_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    probe, seen = tmp_path / "probe.py", tmp_path / "envs.jsonl"
    probe.write_text(PROBE)
    first = dict(ENV, FIRST_ONLY="1")
    viewer = subprocess.Popen([sys.executable, "-m", "loratui", "run", "--headless", "--runs-dir", str(watch_dir),
                               "--", sys.executable, str(probe), str(seen),
                               *_seed(model_dir, tmp_path / "out", 400)[1:]],
                              cwd=tmp_path, env=first, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    run = _run(watch_dir)
    _wait_step(run, 2)
    assert loratui("suspend", "--runs-dir", str(watch_dir), env=ENV).returncode == 0
    # The supervisor's own word that the run is suspended (after the trainer's), and the command gone.
    wait_for(lambda: kinds(run, "state")[-1]["state"] == events.SUSPENDED and "reason" in kinds(run, "state")[-1]
             and _status(run).alive == "supervisor", timeout=300)
    _kill_supervisor(run)
    resuming = {k: v for k, v in ENV.items() if k != "FIRST_ONLY"} | {"RESUME_ONLY": "1"}
    result = loratui("resume", "--runs-dir", str(watch_dir), env=resuming)
    assert result.returncode == 0, result.stderr
    wait_for(lambda: len(seen.read_text().splitlines()) == 2, timeout=300)
    assert loratui("stop", "--runs-dir", str(watch_dir), env=ENV).returncode == 0
    wait_for(lambda: kinds(run, "end"), timeout=300)
    began, resumed = (json.loads(line) for line in seen.read_text().splitlines())
    assert resumed.get("FIRST_ONLY") == "1" and "RESUME_ONLY" not in resumed
    moved = {k for k in began.keys() | resumed.keys() if began.get(k) != resumed.get(k)}
    # What differs is loratui's own, as documented: its parent (the keeper). The checkpoint it resumes from is no
    # variable of the script's (it was LORATUI_RESUME_FROM, in os.environ from import to the first train()).
    assert moved <= {"LORATUI_SUPERVISOR_PID"}, moved
    for seen in (began, resumed):
        added = {k for k in seen if k.startswith("LORATUI_") and k not in ENV}  # (the suite's LORATUI_CACHE is ENV's)
        assert added == {"LORATUI_RUN_DIR", "LORATUI_HOOK_ROOT", "LORATUI_SUPERVISOR_PID"}, added  # README's three
    # Kept past the end, as the alert URL is: a restart with applied advice starts the new run in it (0600).
    assert _first_env(run).exists() and _first_env(run).stat().st_mode & 0o077 == 0
    viewer.kill()
