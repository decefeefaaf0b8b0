"""`loratui mcp` driven through the MCP SDK's own stdio client against a real tiny run (issue 29).

The server is the installed CLI (`python -m loratui mcp`), spoken to as an agent would: list the runs, read
status while it trains, read the advice, pause and resume with --allow-control, be refused without it, and
stop only with the one-time token. Every action must land in the run's log as coming from the agent.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, kinds, wait_for
from tests.test_run import start_and_reach

mcp = pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

pytestmark = pytest.mark.slow


@asynccontextmanager
async def session(runs_dir: Path, *extra: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "loratui", "mcp", "--runs-dir",
                                                                 str(runs_dir), *extra],
                                   env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=str(REPO))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        yield client


async def call(client: ClientSession, tool: str, **arguments: Any) -> tuple[bool, Any]:
    """(is_error, the answer: structured data, or the error's text)."""
    result = await client.call_tool(tool, arguments)
    text = "".join(getattr(part, "text", "") for part in result.content)
    if result.is_error if hasattr(result, "is_error") else result.isError:
        return True, text
    structured = getattr(result, "structured_content", None) or getattr(result, "structuredContent", None)
    return False, structured if structured is not None else json.loads(text)


async def poll(predicate: Callable[[], Any], timeout: float = 120.0) -> Any:
    """Wait for a condition without blocking the client's event loop."""
    return await asyncio.to_thread(wait_for, predicate, timeout)


def _states(run: Path) -> list[str]:
    return [str(e["state"]) for e in kinds(run, "state")]


async def test_an_agent_reads_a_live_run_and_controls_it_only_when_allowed(runs_dir: Path) -> None:
    secret = "tk_agent-never-sees-93f1"  # an alert URL's topic: kept by loratui, never answered to an agent
    viewer, run = start_and_reach(runs_dir, max_steps=100000, step=2,
                                  extra=("--notify", f"http://127.0.0.1:9/{secret}"))
    try:
        async with session(runs_dir) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            assert {"list_runs", "run_status", "run_advice", "run_summary", "run_output", "estimate", "doctor",
                    "pause", "resume", "stop", "apply_advice"} <= tools
            error, listed = await call(client, "list_runs")
            assert not error and [row["run"] for row in listed["runs"]] == [run.name]
            error, first = await call(client, "run_status", run=run.name)
            assert not error and first["state"] == "training" and first["step"] >= 2
            assert first["loss"] is not None and first["max_steps"] == 100000
            await poll(lambda: any(e["step"] > first["step"] + 1 for e in kinds(run, "step")))
            error, later = await call(client, "run_status", run=run.name)
            assert not error and later["step"] > first["step"]  # read while it trains
            error, advice = await call(client, "run_advice", run=run.name)
            assert not error and isinstance(advice["advice"], list)
            answers = [listed, first, later, advice]
            for tool in ("run_summary", "run_output"):
                error, answer = await call(client, tool, run=run.name)
                assert not error, answer
                answers.append(answer)
            assert secret not in json.dumps(answers)
            error, said = await call(client, "pause", run=run.name)
            assert error and "--allow-control" in said  # refused: control is off
            error, said = await call(client, "run_status", run=str(run))
            assert error and "not by a path" in said  # paths are not names: nothing outside the runs dir
        assert "paused" not in _states(run)

        async with session(runs_dir, "--allow-control") as client:
            error, said = await call(client, "pause", run=run.name)
            assert not error, said
            await poll(lambda: "paused" in _states(run))
            error, said = await call(client, "resume", run=run.name)
            assert not error, said
            await poll(lambda: _states(run)[-1] == "training")
            error, asked = await call(client, "stop", run=run.name)
            assert not error and "token" in asked and "stop" in asked["would"]
            assert not kinds(run, "end")  # the first call only says what would happen
            error, said = await call(client, "stop", run=run.name, token="not-the-token")
            assert error and "token" in said
            error, said = await call(client, "stop", run=run.name, token=asked["token"])
            assert not error, said
            await poll(lambda: kinds(run, "end"))
            error, said = await call(client, "stop", run=run.name, token=asked["token"])
            assert error  # a token is used once
        assert kinds(run, "end")[-1]["state"] == "stopped"
        sources = {(e["command"], e["source"]) for e in kinds(run, "control")}
        assert {("pause", "agent"), ("resume", "agent"), ("stop", "agent")} <= sources
    finally:
        viewer.kill()
        viewer.wait()


async def test_doctor_and_estimate_answer_without_a_run(runs_dir: Path) -> None:
    runs_dir.mkdir(parents=True)
    async with session(runs_dir) as client:
        error, found = await call(client, "doctor", text="torch.OutOfMemoryError: CUDA out of memory. Tried to "
                                  "allocate 2.00 GiB. GPU 0 has a total capacity of 23.64 GiB of which 1.02 GiB "
                                  "is free. Including non-PyTorch memory, this process has 22.60 GiB memory in "
                                  "use. Of the allocated memory 21.80 GiB is allocated by PyTorch, and 350.00 MiB "
                                  "is reserved by PyTorch but unallocated.\n")
        assert not error and found["items"] and found["items"][0]["id"].startswith("oom")
        error, estimate = await call(client, "estimate", recipe="qwen7b", gpu_gb=24)
        assert not error and estimate["verdict"] in ("fits", "tight", "does NOT fit")
        error, said = await call(client, "estimate", recipe="../../etc/passwd")
        assert error and "not by a path" in said


def test_apply_advice_shows_the_command_a_watched_run_would_run_again(tmp_path: Path) -> None:
    """Issue 25 item 2 for agents: the first apply_advice call names the command line from run.json (with
    its control characters made inert), as the app's `A` prompt does, before anything runs."""
    from types import SimpleNamespace

    from loratui import rundir
    from loratui.commands.mcp_server import would_apply

    settings = rundir.RunSettings(run_id="r1", name="watched", recipe_source="", command=[
        "python", "train.py", "--config", "cfg.yaml", "--note", "a\x1b]0;pwned\x07b"])
    run = rundir.create(tmp_path / "runs", settings, "")
    said = would_apply(run, SimpleNamespace(change={"per_device_train_batch_size": 2}))
    assert "python train.py --config cfg.yaml" in said["would"] and said["command"].startswith("python train.py")
    assert "\x1b" not in said["would"] + said["command"]
