"""Several nodes, one run: each node writes only its own log in the shared run directory, readers merge them.

One host cannot be two nodes, so the real test runs two "nodes" as separate process trees with their own
Slurm identities (SLURMD_NODENAME, SLURM_NODEID) and a real two-node torchrun (gloo) between them, writing
one run directory; the merge's GPUs and clock offsets are checked on logs written as two nodes would.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from loratui import events, nodelogs
from loratui.eventlog import EventWriter
from loratui.logic.runstate import RunState
from loratui.rundir import RunDir
from loratui.sources.runlog import LiveSource
from tests.conftest import REPO, read_events, wait_for, watched_pids
from tests.slurm_helpers import job_env, loratui_cli, short_dir

SCRIPTS = REPO / "tests" / "data" / "scripts"


@pytest.fixture
def runs() -> Iterator[Path]:
    yield from short_dir("ln-")


def _header(run_id: str, node: str, node_id: int, offset: float, t: float) -> events.Header:
    return events.Header(t=t, schema=1, run_id=run_id, recipe_hash="x", node=node, clock_offset=offset,
                         slurm={"SLURM_JOB_ID": "77", "SLURM_NODEID": str(node_id), "SLURMD_NODENAME": node})


def _write(path: Path, found: list[events.AnyEvent]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = EventWriter(path)
    for e in found:
        writer.write(e)
    writer.close()


def test_two_nodes_logs_merge_into_one_run_with_both_nodes_gpus_on_node_0s_clock(tmp_path: Path) -> None:
    run = tmp_path / "job77-two"
    t0 = 1_800_000_000.0
    gib = 1 << 30
    _write(run / "events.jsonl", [
        _header("job77-two", "gpu01", 0, offset=0.0, t=t0),
        events.GpuInfo(t=t0, available=True, names=["H200", "H200"], totals=[140 * gib] * 2, indices=[0, 1]),
        events.Sample(t=t0 + 1, gpu=0, used_max=30 * gib, used_last=30 * gib, used_min=30 * gib, total=140 * gib),
        events.Step(t=t0 + 10, step=1, epoch=0.0, step_time=1.0, rank=0),
        events.End(t=t0 + 20, state=events.FINISHED, exit_code=0, step=1)])
    # Node 1's clock runs 5 s ahead of node 0's: the file server saw both, so its offset is 5 s smaller.
    _write(run / "nodes" / "gpu02" / "events.jsonl", [
        _header("gpu02", "gpu02", 1, offset=-5.0, t=t0 + 5),
        events.State(t=t0 + 5, state=events.STARTING),
        events.GpuInfo(t=t0 + 5, available=True, names=["H200", "H200"], totals=[140 * gib] * 2, indices=[0, 1]),
        events.Sample(t=t0 + 6, gpu=1, used_max=50 * gib, used_last=50 * gib, used_min=50 * gib, total=140 * gib),
        events.Step(t=t0 + 15.5, step=1, epoch=0.0, step_time=1.0, rank=3),
        events.Output(t=t0 + 16, stream="stderr", lines=["warning: slow disk"]),
        events.End(t=t0 + 24, state=events.FINISHED, exit_code=0, step=1)])
    merged = [e for e in (events.decode_line(line.encode()) for line in
                          nodelogs.merged_log(run).read_text().splitlines()) if e is not None]
    assert isinstance(merged[0], events.Header) and merged[0].run_id == "job77-two"
    assert [e.t for e in merged] == sorted(e.t for e in merged)
    state = RunState().feed_all(merged)  # type: ignore[arg-type]
    assert sorted(state.gpus) == [0, 1, 100, 101] and state.gpus[101].used_peak == 50 * gib
    assert state.gpus[100].name == "gpu02: H200"
    assert state.rank_steps == {0: 1, 3: 1}
    rank3 = next(e for e in merged if isinstance(e, events.Step) and e.rank == 3)
    assert rank3.t == pytest.approx(t0 + 10.5)  # 15.5 on node 1's clock is 10.5 on node 0's
    assert state.end is not None and state.end.state == events.FINISHED and state.end.t == t0 + 20  # node 0's end
    said = [n.message for n in state.notices]
    assert any("node gpu02 (node id 1)" in m and "-5.000 s" in m for m in said), said
    assert any(m.startswith("node gpu02: its processes ended, finished") for m in said), said
    assert any(line == "[gpu02] warning: slow disk" for e in merged if isinstance(e, events.Output) for line in e.lines)
    # The views read the same merge: live (attach), replay and doctor.
    live = LiveSource(RunDir(run))
    assert sorted(RunState().feed_all(live.poll().events).gpus) == [0, 1, 100, 101]
    summary = loratui_cli("replay", str(run), "--summary")
    assert summary.returncode == 0, summary.stderr
    assert json.loads(summary.stdout)["peak_device_used_gib"] == 50.0  # node 1's GPU, seen by the replay
    assert loratui_cli("doctor", str(run)).returncode == 0
    before = nodelogs.merged_log(run).stat().st_mtime_ns
    assert nodelogs.merged_log(run).stat().st_mtime_ns == before  # merged once, not at every look


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _steps(path: Path, rank: int) -> list[int]:
    return [int(e["step"]) for e in read_events(path) if e.get("kind") == "step" and e.get("rank", 0) == rank]  # type: ignore[arg-type]


@pytest.mark.slow
def test_two_simulated_nodes_write_one_run_directory_controlled_from_a_login_node(
        runs: Path, model_cache: Path, tmp_path: Path) -> None:
    from loratui.trainer.tiny import ensure_tiny_model

    model, port, job = ensure_tiny_model(), _free_port(), str(900_000 + os.getpid() % 90_000)
    nodes = []
    for node_id, node in enumerate(("node-a", "node-b")):
        env = job_env(SLURM_JOB_ID=job, SLURM_JOB_NAME="two-nodes", SLURM_JOB_NUM_NODES="2", SLURM_NNODES="2",
                      SLURM_NODEID=str(node_id), SLURM_PROCID=str(node_id), SLURM_NTASKS="2", SLURMD_NODENAME=node)
        torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node_rank", str(node_id),
                    "--nproc_per_node", "1", "--master_addr", "127.0.0.1", "--master_port", str(port),
                    str(SCRIPTS / "seed_trainer.py"), "--model", str(model), "--out", str(tmp_path / "out"),
                    "--max-steps", "400", "--ddp-backend", "gloo"]
        nodes.append(subprocess.Popen([sys.executable, "-m", "loratui", "run", "--headless", "--runs-dir", str(runs),
                                       "--", *torchrun], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, start_new_session=True))
    try:
        run: Path = wait_for(lambda: (found := list(runs.glob("job*"))) and found[0], timeout=120)  # type: ignore[assignment]
        node_b = run / "nodes" / "node-b"
        wait_for(lambda: _steps(run, 0) and _steps(node_b, 1), timeout=600)
        assert read_events(node_b)[0]["node"] == "node-b" and read_events(run)[0]["node"] == "node-a"
        assert not _steps(run, 1) and not _steps(node_b, 0)  # each node appends only to its own log
        login = job_env(SLURMD_NODENAME="login")  # another host: pids mean nothing, no socket reaches
        said = loratui_cli("pause", run.name, "--runs-dir", str(runs), env=login)
        assert said.returncode == 0 and "through its run directory" in said.stdout, said.stdout + said.stderr
        wait_for(lambda: read_events(run)[-1:] and any(e.get("state") == "paused" for e in read_events(run)
                                                         if e.get("kind") == "state"), timeout=300)
        held = wait_for(lambda: _stable(run, node_b), timeout=300)
        assert abs(held[0] - held[1]) <= 1, held  # every rank holds at the same step
        listed = json.loads(loratui_cli("ls", "--json", "--runs-dir", str(runs), env=login).stdout)
        assert [r["state"] for r in listed] == ["paused"], listed
        state = RunState().feed_all(LiveSource(RunDir(run)).poll().events)  # what attach shows
        assert set(state.rank_steps) == {0, 1}
        assert any("node node-b" in n.message for n in state.notices)
        assert loratui_cli("stop", run.name, "--runs-dir", str(runs), env=login).returncode == 0
        for proc in nodes:
            proc.communicate(timeout=300)
        doctor = loratui_cli("doctor", str(run))
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        replay = loratui_cli("replay", str(run), "--summary")
        assert replay.returncode == 0, replay.stderr
        merged = [json.loads(line) for line in (run / nodelogs.MERGED).read_text().splitlines()]
        assert {e.get("rank", 0) for e in merged if e["kind"] == "step"} == {0, 1}
    finally:
        for proc in nodes:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        for folder in [*runs.glob("*/"), *runs.glob("*/nodes/*/")]:
            for pid in watched_pids(folder):
                os.kill(pid, signal.SIGKILL)


def _stable(run: Path, node_b: Path) -> tuple[int, int] | None:
    """Both ranks' step counts, once they stay the same for a few seconds."""
    before = (len(_steps(run, 0)), len(_steps(node_b, 1)))
    time.sleep(3)
    after = (len(_steps(run, 0)), len(_steps(node_b, 1)))
    return (max(_steps(run, 0)), max(_steps(node_b, 1))) if before == after else None
