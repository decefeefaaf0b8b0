"""Shared fixtures: an isolated model cache, a runs directory, and helpers to drive real runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "recipes" / "tiny.toml"
SMALL_QWEN2 = {"model_type": "qwen2", "vocab_size": 2048, "hidden_size": 256, "intermediate_size": 768,
               "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2}
"""A small but real Qwen2 `config.json`: enough for the estimator, no weights."""


def write_model_config(folder: Path, config: dict[str, object] = SMALL_QWEN2) -> Path:
    """A model folder holding only `config.json`, as `--model-path` would name a downloaded checkpoint."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.fixture(scope="session", autouse=True)
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the tiny model once per session into a private cache (as a first-time user would)."""
    cache = Path(os.environ.get("LORATUI_TEST_CACHE") or tmp_path_factory.mktemp("cache"))
    os.environ["LORATUI_CACHE"] = str(cache)
    # Alert targets live in the user's state directory: the suite's own, never the developer's.
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("state"))
    return cache


@pytest.fixture(scope="session")
def healthy_tiny_run(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> Path:
    """One real 40-step tiny CPU run, recorded by the real supervisor, shared by the tests that only
    read it (the advisor's and the doctor's "a healthy run gets no advice")."""
    runs = tmp_path_factory.mktemp("healthy_runs")
    result = loratui("run", str(TINY), "--headless", "--max-steps", "40", "--runs-dir", str(runs), timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    (run_dir,) = [p for p in runs.iterdir() if (p / "events.jsonl").exists()]
    return run_dir


@pytest.fixture
def runs_dir(tmp_path: Path) -> Iterator[Path]:
    """A runs directory whose leftover supervisors and trainers are killed after the test."""
    runs = tmp_path / "runs"
    yield runs
    for run in runs.glob("*/"):
        pids = [int(e["pid"]) for e in read_events(run)  # type: ignore[call-overload]
                if e.get("kind") == "train_begin" and e.get("pid")]
        pids += watched_pids(run)
        pidfile = run / "supervisor.pid"
        if pidfile.exists():
            pids.append(int(pidfile.read_text().split()[0]))
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def watched_pids(run: Path) -> list[int]:
    """Processes of a watched command (`loratui run -- COMMAND`): their environment names the run (its keeper,
    loratui's own process, aside)."""
    marker = f"LORATUI_RUN_DIR={run.resolve()}".encode()
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and marker in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0") \
                    and b"loratui.supervisor.keeper" not in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
        except OSError:
            continue
    return found


def loratui(*args: str, timeout: float = 300, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess."""
    return subprocess.run([sys.executable, "-m", "loratui", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, **kwargs)  # type: ignore[call-overload]


def read_events(run_path: Path) -> list[dict[str, object]]:
    """The raw JSON objects of a run's log (independent of our own decoder)."""
    try:
        text = (run_path / "events.jsonl").read_text()
    except FileNotFoundError:
        return []
    # a line the writer has not finished yet (no newline) is read next time: a test polling a live run once read
    # `{"kind":"step","step":192,"epoch":2.56,"ste` and failed on it (test_slurm_limit, under load)
    lines = text.splitlines() if text.endswith("\n") else text.splitlines()[:-1]
    return [json.loads(line) for line in lines if line.strip()]


def only_run(runs: Path) -> Path:
    found = [p for p in runs.iterdir() if p.is_dir()]
    assert len(found) == 1, found
    return found[0]


MIN_WAIT_S = float(os.environ.get("LORATUI_TEST_MIN_WAIT_S", "120"))
"""No wait gives up sooner: on a loaded 2-core box (the full suite, other jobs) a supervisor noticing its
trainer or a run reaching a step takes several times its usual time, and a slow box must make a test slower,
never red. A wait returns as soon as its condition holds, so a passing test never waits this long."""


def wait_for(predicate: Callable[[], object], timeout: float = 120, every: float = 0.1) -> object:
    """Poll until `predicate()` is truthy; fail the test after `timeout` (at least MIN_WAIT_S) seconds."""
    timeout = max(timeout, MIN_WAIT_S)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {predicate}")


def kinds(run_path: Path, kind: str) -> list[dict[str, object]]:
    return [e for e in read_events(run_path) if e.get("kind") == kind]


def write_run(path: Path, found: Iterable[Any]) -> Any:
    """A run directory (a `RunDir`) whose event log holds `found`, written as a run writes it: for tests of what
    reads a run's record."""
    from loratui.eventlog import EventWriter
    from loratui.rundir import RunDir

    path.mkdir(parents=True)
    log = EventWriter(path / "events.jsonl")
    for event in found:
        log.write(event)
    log.close()
    return RunDir(path)
