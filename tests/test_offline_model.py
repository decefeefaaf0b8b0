"""Issue 26 item 10: a recipe whose model is a hub id, not cached, with the hub out of reach is refused
before anything starts, with what to do (was: the run started and died on a connection traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, loratui

REFUSED_HUB = "http://127.0.0.1:9"  # the discard port: nothing listens, the connection is refused at once


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    return {**env, "HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": REFUSED_HUB, **extra}


def test_run_of_an_uncached_hub_model_without_network_is_refused_before_it_starts(tmp_path: Path) -> None:
    result = loratui("run", "qwen7b", "--headless", "--runs-dir", str(tmp_path / "runs"), env=_env(tmp_path))
    assert result.returncode == 2, result.stderr[-2000:]
    assert "no network and the model is not cached: pass --model-path" in result.stderr
    assert "Qwen/Qwen2.5-7B-Instruct" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "runs").exists()  # no run directory, no supervisor


def test_offline_mode_names_the_variable(tmp_path: Path) -> None:
    result = loratui("run", "qwen7b", "--headless", "--runs-dir", str(tmp_path / "runs"),
                     env=_env(tmp_path, HF_HUB_OFFLINE="1"))
    assert result.returncode == 2
    assert "HF_HUB_OFFLINE is set and the model is not cached: pass --model-path" in result.stderr
    assert not (tmp_path / "runs").exists()


CHECK = """
import argparse, sys
from pathlib import Path
from loratui.commands.launch_checks import check_model_reachable
check_model_reachable(argparse.Namespace(recipe=Path(sys.argv[1]), model_path=sys.argv[2] or None))
print("ok")
"""


def _check(tmp_path: Path, model_path: str, **env: str) -> subprocess.CompletedProcess[str]:
    recipe = REPO / "loratui" / "recipes" / "qwen7b.toml"
    return subprocess.run([sys.executable, "-c", CHECK, str(recipe), model_path], capture_output=True, text=True,
                          timeout=300, env=_env(tmp_path, PYTHONPATH=str(REPO), **env))


def test_a_cached_model_or_a_local_path_needs_no_network(tmp_path: Path) -> None:
    snapshot = tmp_path / "hf" / "hub" / "models--Qwen--Qwen2.5-7B-Instruct" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0" * 40)
    (snapshot / "config.json").write_text("{}")
    assert "no network" in _check(tmp_path, "").stderr  # the config alone is not the model
    (snapshot / "model.safetensors").write_bytes(b"")
    assert _check(tmp_path, "").stdout.strip() == "ok"
    assert _check(tmp_path, "", HF_HUB_OFFLINE="1").stdout.strip() == "ok"
    local = tmp_path / "model"
    local.mkdir()
    assert _check(tmp_path / "empty", str(local), HF_HUB_OFFLINE="1").stdout.strip() == "ok"


def test_a_relative_model_path_is_read_from_the_shell_s_directory(tmp_path: Path) -> None:
    """`loratui run tiny --model-path m2` beside m2/ was told "no network and the model is not cached ... (a copy
    of m2 on disk)", and `--model-path ./m2` looked inside the installed package's recipes folder (a built-in
    recipe's folder); `estimate --model-path m2` read m2/ from the shell's directory all along."""
    from tests.conftest import write_model_config
    model = write_model_config(tmp_path / "m2")  # config.json, no weights: refused for that, by its real path
    for given in ("m2", "./m2"):
        result = subprocess.run([sys.executable, "-m", "loratui", "run", "tiny", "--model-path", given,
                                 "--headless", "--runs-dir", str(tmp_path / "runs")], capture_output=True,
                                text=True, timeout=300, cwd=tmp_path, env=_env(tmp_path), check=False)
        assert result.returncode == 2, result.stderr[-2000:]
        assert f"model directory {model} has config.json but no weights" in result.stderr, result.stderr
        assert "not cached" not in result.stderr and not (tmp_path / "runs").exists()
