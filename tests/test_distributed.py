"""Two-process DDP (gloo on the CPU) through `loratui run`: rank-tagged events, pause of all ranks,
and a killed rank that stops the run cleanly."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from loratui.supervisor import control
from tests.conftest import REPO, TINY, kinds, loratui, only_run, wait_for
from tests.test_run import _start_detached_recipe

pytestmark = pytest.mark.slow


def _ddp_recipe(tmp_path: Path) -> Path:
    recipe = tmp_path / "tiny-ddp.toml"
    text = TINY.read_text().replace('path = "data/', f'path = "{REPO}/recipes/data/')
    recipe.write_text(text + "\n[distributed]\nnum_processes = 2\nbackend = \"gloo\"\n")
    return recipe


def _rank_steps(run: Path, rank: int) -> list[int]:
    return [int(e["step"]) for e in kinds(run, "step") if e.get("rank", 0) == rank]  # type: ignore[arg-type]


def _rank_pids(run: Path) -> dict[int, int]:
    """Trainer pids by RANK, read from /proc (the processes torchrun started for this run)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            if b"loratui.trainer" not in cmdline or str(run).encode() not in cmdline:
                continue
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        ranks = [v.split(b"=", 1)[1] for v in environ if v.startswith(b"RANK=")]
        if ranks and b"torch.distributed.run" not in b" ".join(cmdline):
            found[int(ranks[0])] = int(entry)
    return found


def test_ddp_run_records_both_ranks(tmp_path: Path, runs_dir: Path) -> None:
    result = loratui("run", str(_ddp_recipe(tmp_path)), "--headless", "--max-steps", "8", "--runs-dir", str(runs_dir))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    run = only_run(runs_dir)
    assert _rank_steps(run, 0) == list(range(1, 9)) and _rank_steps(run, 1) == list(range(1, 9))
    assert kinds(run, "train_begin")[0]["world_size"] == 2 and len(kinds(run, "train_begin")) == 1
    assert kinds(run, "end")[0]["state"] == "finished"
    assert not kinds(run, "exit")  # rank 0's exit is not torchrun's: only the supervisor says how the run ended


def test_pause_holds_every_rank_and_a_killed_rank_stops_all(tmp_path: Path, runs_dir: Path) -> None:
    viewer = _start_detached_recipe(_ddp_recipe(tmp_path), runs_dir, "--max-steps", "3000")
    run = wait_for(lambda: runs_dir.exists() and any(runs_dir.iterdir()) and only_run(runs_dir))
    wait_for(lambda: len(_rank_steps(run, 1)) >= 3, timeout=120)  # type: ignore[arg-type]
    control.send(run / "control.sock", "pause")  # type: ignore[operator]
    wait_for(lambda: kinds(run, "state")[-1]["state"] == "paused", timeout=60)  # type: ignore[arg-type]
    time.sleep(0.5)
    held = (len(_rank_steps(run, 0)), len(_rank_steps(run, 1)))  # type: ignore[arg-type]
    time.sleep(1.5)
    assert (len(_rank_steps(run, 0)), len(_rank_steps(run, 1))) == held  # type: ignore[arg-type]
    assert abs(held[0] - held[1]) <= 1  # both hold at the same boundary
    control.send(run / "control.sock", "resume")  # type: ignore[operator]
    wait_for(lambda: len(_rank_steps(run, 1)) > held[1] + 2, timeout=60)  # type: ignore[arg-type]

    pids = _rank_pids(run)  # type: ignore[arg-type]
    assert set(pids) == {0, 1}, pids
    os.kill(pids[1], signal.SIGKILL)
    viewer.communicate(timeout=120)
    end = kinds(run, "end")[0]  # type: ignore[arg-type]
    assert end["state"] == "failed" and "rank 1" in str(end["error"])
    for pid in pids.values():  # no orphaned rank keeps running
        wait_for(lambda: not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2],
                 timeout=30)
