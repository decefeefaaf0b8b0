"""`loratui doctor`: pasted logs and tracebacks, run directories, JSON output, and bad paths."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loratui import events
from loratui.cli import main

LOGS = Path(__file__).parent / "data" / "logs"
REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("name", "ids"), [
    ("oom_old_rtx3090_24gb.txt", ["oom_full"]),
    ("oom_old_v100_32gb_seed.txt", ["oom_full"]),
    ("oom_new_rtx5090_32gb_full.txt", ["oom_full"]),
    ("oom_new_a100_40gb_other_process.txt", ["oom_other_process"]),
    ("oom_new_h100_80gb_fragmentation.txt", ["oom_fragmentation"]),
    ("oom_multirank_h100.txt", ["oom_full"]),
    ("oom_eval_a100_40gb.txt", ["oom_at_eval"]),
    ("oom_plain_cuda_error.txt", ["oom_full"]),
    ("oom_junk_values.txt", ["oom_full"]),
    ("cuda_illegal_memory_access.txt", ["cuda_error"]),
    ("nccl_timeout_2rank.txt", ["nccl_timeout"]),
    ("cuda_device_assert.txt", ["cuda_error"]),
    ("bnb_without_gpu.txt", ["bnb_setup"]),
    ("bnb_cuda_setup_failed.txt", ["bnb_setup"]),
    ("flash_attn_missing.txt", ["flash_attn_unavailable"]),
    ("nan_paged_adamw.txt", ["nan_loss"]),
    ("healthy_tiny_stdout.txt", []),
    ("healthy_tiny_stderr.txt", []),
])
def test_text_logs(name: str, ids: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["doctor", str(LOGS / name), "--json"])
    items = json.loads(capsys.readouterr().out)
    assert code == (1 if any(item["severity"] == "error" for item in items) else 0)
    assert [item["id"] for item in items] == ids
    for item in items:
        assert set(item) == {"id", "severity", "title", "evidence", "change", "step"}


@pytest.mark.parametrize(("name", "expected"), [
    ("oom_junk_values.txt", "no usable numbers"),
    ("oom_multirank_h100.txt", "rank 1"),
    ("oom_new_a100_40gb_other_process.txt", "PID 2918771"),
    ("nan_paged_adamw.txt", "step 4"),
])
def test_text_output_mentions(name: str, expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", str(LOGS / name)]) == 1  # each prints an ERROR
    assert expected in capsys.readouterr().out


def test_healthy_text_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", str(LOGS / "healthy_tiny_stdout.txt")]) == 0
    assert "no problems found" in capsys.readouterr().out


@pytest.mark.parametrize("path", ["/no/such/file.log", "no-such-run-id"])
def test_missing_path_exits_2(path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", path, "--runs-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert path in err and len(err.strip().splitlines()) == 1


def test_directory_without_log_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", str(tmp_path)]) == 2
    assert "events.jsonl" in capsys.readouterr().err


def _write_run(run_dir: Path, found: list[events.AnyEvent], recipe_text: str) -> None:
    run_dir.mkdir()
    (run_dir / "recipe.toml").write_text(recipe_text)
    (run_dir / "events.jsonl").write_bytes(b"".join(events.encode(e) for e in found) + b'{"torn')


RECIPE = """
[model]
path = ""
[training]
per_device_train_batch_size = 4
gradient_accumulation_steps = 2
[data]
path = "train.jsonl"
"""


def test_run_directory_uses_its_recipe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A recorded OOM in a run directory gets moves from its recipe copy (even one needing --model-path)."""
    found: list[events.AnyEvent] = [
        events.Header(t=0, schema=1, run_id="r", recipe_hash="h"),
        events.TrainBegin(t=1, max_steps=10, num_epochs=1.0),
        events.Step(t=2, step=1, epoch=0.1, step_time=1.0),
        events.Output(t=3, stream="stderr", lines=[(LOGS / "oom_old_rtx3090_24gb.txt").read_text().splitlines()[-1]]),
        events.End(t=4, state="failed", exit_code=1),
    ]
    _write_run(tmp_path / "run1", found, RECIPE)
    assert main(["doctor", str(tmp_path / "run1"), "--json"]) == 1
    (item,) = json.loads(capsys.readouterr().out)
    assert item["id"] == "oom_full" and item["step"] == 1
    assert item["change"] == {"training.per_device_train_batch_size": 2, "training.gradient_accumulation_steps": 4}
    assert main(["doctor", "run1", "--runs-dir", str(tmp_path)]) == 1
    assert "per_device_train_batch_size = 2" in capsys.readouterr().out
    assert main(["doctor", str(tmp_path / "run1" / "events.jsonl"), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)[0]["change"] == item["change"]


@pytest.mark.slow
def test_real_tiny_run_is_healthy(healthy_tiny_run: Path) -> None:
    """The doctor finds nothing wrong with a real tiny CPU run, run through the console script's module."""
    run_dir = healthy_tiny_run
    script = shutil.which("loratui") or ""
    command = [script] if script else [sys.executable, "-c", "import sys; from loratui.cli import main; "
                                                             "sys.exit(main())"]
    done = subprocess.run(command + ["doctor", str(run_dir), "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
