"""Real CPU runs left alone: alerts from the supervisor (the secret kept outside the run directory, 0600, and
used again by the supervisor a resume starts), a hung trainer detected, and `loratui stacks` showing where
it waits."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from loratui.rundir import RunDir
from loratui.supervisor import control
from tests.conftest import REPO, TINY, kinds, loratui, only_run, read_events, wait_for
from tests.test_alerts import Endpoint
from tests.test_dead_supervisor import _kill_supervisor, _states
from tests.test_run import start_and_reach

pytestmark = pytest.mark.slow
SECRET = "tk_5ecret-topic-93f1"


@pytest.fixture
def endpoint():
    server = Endpoint()
    yield server
    server.server.shutdown()


def _secret_anywhere(run: Path) -> list[str]:
    """Files of the run directory that hold the secret; it is kept, readable by its owner only, outside it."""
    stored = RunDir(run).alerts
    assert SECRET.encode() in stored.read_bytes() and stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert not stored.is_relative_to(run.resolve())
    return [str(p) for p in run.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]


def _sent(endpoint: Endpoint) -> list[str]:
    return [json.loads(r["body"])["event"] for r in endpoint.requests]


def test_alerts_reach_the_endpoint_and_the_url_stays_secret(endpoint: Endpoint, runs_dir: Path) -> None:
    url = f"{endpoint.url}/{SECRET}"
    result = loratui("run", str(TINY), "--headless", "--max-steps", "3", "--runs-dir", str(runs_dir),
                     "--notify", url, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    (request,) = endpoint.wait(1)
    body = json.loads(request["body"])
    assert request["path"] == f"/{SECRET}" and body["event"] == "finished" and "step 3" in body["message"]
    assert "loss " in body["message"] and "→" in body["message"] and "loratui report" in body["message"]  # the summary
    run = only_run(runs_dir)
    assert _secret_anywhere(run) == []  # not in the log, run.json, status.json, the recipe copy or outputs
    assert SECRET not in result.stdout + result.stderr
    assert read_events(run)[-1]["kind"] == "end"  # the end alert is sent, not logged after the end
    for shown in (loratui("ls", "--runs-dir", str(runs_dir)), loratui("replay", str(run), "--summary")):
        assert shown.returncode == 0 and SECRET not in shown.stdout + shown.stderr


def test_a_suspended_run_resumed_by_a_new_supervisor_still_alerts(endpoint: Endpoint, runs_dir: Path) -> None:
    """Issue 19: suspend overnight, the supervisor dies, `loratui resume` (no --notify) starts a new one: the
    run's end still reaches the endpoint given to `loratui run --notify`."""
    url = f"{endpoint.url}/{SECRET}"
    viewer, run = start_and_reach(runs_dir, max_steps=8, step=3, extra=("--notify", url))
    try:
        control.send(RunDir(run).control, "suspend")  # in-process: lands before the last step
        wait_for(lambda: _states(run)[-1:] == ["suspended"], timeout=120)
        wait_for(lambda: "suspended" in _sent(endpoint), timeout=30)  # the first supervisor's last word
        _kill_supervisor(run)
        resumed = loratui("resume", "--runs-dir", str(runs_dir), env={k: v for k, v in os.environ.items()
                                                                       if k != "LORATUI_NOTIFY_URL"})
        assert resumed.returncode == 0 and SECRET not in resumed.stdout + resumed.stderr, resumed.stderr
        wait_for(lambda: kinds(run, "end"), timeout=400)
        wait_for(lambda: "finished" in _sent(endpoint), timeout=60)  # from the new supervisor
        assert kinds(run, "end")[0]["state"] == "finished"
        assert all(r["path"] == f"/{SECRET}" for r in endpoint.requests)
        assert _secret_anywhere(run) == []
    finally:
        viewer.kill()
        viewer.wait()


def test_a_hung_trainer_is_detected_and_stacks_show_where_it_waits(tmp_path: Path, runs_dir: Path,
                                                                  endpoint: Endpoint) -> None:
    text = TINY.read_text().replace('path = "data/', f'path = "{REPO}/recipes/data/')
    recipe = tmp_path / "hangs.toml"
    recipe.write_text(text.replace("warn_gb = 30", "warn_gb = 30\nhang_factor = 10\nhang_min_s = 30"))
    env = dict(os.environ, LORATUI_TEST_HANG_AT_STEP="6")
    viewer = subprocess.Popen([sys.executable, "-m", "loratui", "run", str(recipe), "--headless", "--runs-dir",
                               str(runs_dir), "--notify", f"{endpoint.url}/{SECRET}"], cwd=REPO, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        run = wait_for(lambda: next(iter(runs_dir.glob("*/events.jsonl")), None), timeout=60).parent
        hung = wait_for(lambda: [e for e in kinds(run, "notice") if e.get("key") == "hung"], timeout=300)
        assert "after step 6" in str(hung[0]["message"]) and "loratui stacks" in str(hung[0]["message"])
        auto = wait_for(lambda: kinds(run, "stacks"), timeout=30)[0]
        assert auto["reason"] == "hung" and "injected_hang" in auto["ranks"]["0"]
        result = loratui("stacks", run.name, "--runs-dir", str(runs_dir), timeout=300)
        assert result.returncode == 0, result.stderr
        assert "=== rank 0 ===" in result.stdout and "injected_hang" in result.stdout
        assert "on_step_end" in result.stdout  # the frame that waits, inside the training loop
        assert len(kinds(run, "stacks")) == 2
        (request, *_) = endpoint.wait(1)
        assert json.loads(request["body"])["event"] == "hung"
        doctor = loratui("doctor", str(run), "--json", timeout=300)
        assert any(a["id"] == "run_hung" for a in json.loads(doctor.stdout))
        assert _secret_anywhere(run) == []
    finally:
        viewer.kill()
        viewer.wait()


def test_an_apprise_url_gets_the_finished_alert_of_a_real_run(endpoint: Endpoint, runs_dir: Path) -> None:
    """Issue 28: any Apprise URL in --notify; `json://` posts Apprise's JSON to the local server."""
    pytest.importorskip("apprise")
    port = endpoint.url.rsplit(":", 1)[1]
    url = f"json://127.0.0.1:{port}/{SECRET}"
    result = loratui("run", str(TINY), "--headless", "--max-steps", "3", "--runs-dir", str(runs_dir),
                     "--notify", url, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    (request,) = endpoint.wait(1)
    body = json.loads(request["body"])
    assert request["path"] == f"/{SECRET}" and "finished" in body["title"] and "step 3" in body["message"]
    assert _secret_anywhere(only_run(runs_dir)) == [] and SECRET not in result.stdout + result.stderr


def test_the_finished_alert_comes_when_the_supervisor_was_killed_mid_run(endpoint: Endpoint, runs_dir: Path) -> None:
    """Issue 28: the trainer writes the end of an orphaned run; the alert the supervisor would have sent
    goes out too (a process started by module name reads the stored target, the trainer never does)."""
    viewer, run = start_and_reach(runs_dir, max_steps=12, step=2, extra=("--notify", f"{endpoint.url}/{SECRET}"))
    try:
        # Held first: unheld, the 10 steps left (35 ms each) can end before the kill lands, and a supervisor
        # killed after its trainer's exit leaves nobody to write the end (CI saw exactly that).
        control.send(RunDir(run).control, "pause")
        wait_for(lambda: _states(run)[-1:] == ["paused"], timeout=120)
        _kill_supervisor(run)
        wait_for(lambda: any(e.get("key") == "supervisor_lost" for e in kinds(run, "notice")), timeout=60)
        resumed = loratui("resume", "--runs-dir", str(runs_dir))
        assert resumed.returncode == 0, resumed.stderr
        wait_for(lambda: kinds(run, "end"), timeout=300)
        assert kinds(run, "end")[-1]["state"] == "finished"
        assert RunDir(run).supervisor_pid() is None  # the orphan ended it: no new supervisor sent the alert
        sent = endpoint.wait(1, timeout=120)
        assert [json.loads(r["body"])["event"] for r in sent] == ["finished"]
        assert "step 12" in json.loads(sent[0]["body"])["message"]
    finally:
        viewer.kill()
        viewer.wait()
