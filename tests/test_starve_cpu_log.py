"""A pasted CPU-only log is not told that its GPU waits for data (trial 13: a CPU run's log whose tqdm bar slowed
read "The GPU waits for data (the training bar slowed ...)", with no GPU anywhere in it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loratui.cli import main


def _bar_that_slows(first: str = "") -> str:
    """An HF Trainer's log on the CPU: its loss dicts and a tqdm bar that slows from 3.3 it/s to 1.2 s/it."""
    lines, elapsed = [first] if first else [], 0.0
    for i in range(1, 201):
        pace = 0.3 if i < 100 else 1.2
        elapsed += pace
        if i % 10 == 0:
            lines.append(f"{{'loss': {6.5 - i / 50:.4f}, 'grad_norm': 1.2, 'learning_rate': 0.0002, "
                         f"'epoch': {i / 200:.2f}}}")
        rate = f"{1 / pace:.2f}it/s" if pace < 1 else f"{pace:.2f}s/it"
        left = int((200 - i) * pace)
        lines.append(f" {i // 2:3d}%|#####     | {i}/200 [{int(elapsed) // 60:02d}:{int(elapsed) % 60:02d}<"
                     f"{left // 60:02d}:{left % 60:02d}, {rate}]")
    return "\n".join(lines) + "\n"


def _doctor(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> str:
    log = tmp_path / "train.log"
    log.write_text(text)
    main(["doctor", str(log)])
    return capsys.readouterr().out


@pytest.mark.parametrize("first", ["Using device: cpu", "GPU available: False, used: False",
                                   "I am training on the CPU, and it got slow"])
def test_a_log_that_says_it_runs_on_the_cpu_is_told_of_its_cores(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                  first: str) -> None:
    out = _doctor(tmp_path, capsys, _bar_that_slows(first))
    assert "Training on the CPU waits (the training bar slowed from 3.33it/s to 1.20s/it" in out, out
    assert "GPU waits" not in out and "nvidia-smi" not in out and f"the run is on the CPU: {first}" in out, out


def test_a_log_that_names_no_gpu_says_training_waits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _doctor(tmp_path, capsys, _bar_that_slows())
    assert "Training waits for data (the training bar slowed" in out, out
    assert "The GPU waits" not in out and "a GPU that waits" not in out, out


def test_a_log_that_names_its_gpu_still_says_the_gpu_waits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _doctor(tmp_path, capsys, _bar_that_slows("CUDA_VISIBLE_DEVICES=0 python train.py"))
    assert "The GPU waits for data (the training bar slowed" in out, out


@pytest.mark.parametrize("config", ['"offload_optimizer": {"device": "cpu"}, NCCL version 2.21.5',
                                    "offload_optimizer:\n  device: cpu\nNCCL version 2.21.5"])
def test_a_deepspeed_offload_config_is_no_cpu_run(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  config: str) -> None:
    out = _doctor(tmp_path, capsys, _bar_that_slows(config))
    assert "The GPU waits for data" in out and "on the CPU waits" not in out, out


def test_a_log_that_names_no_gpu_is_told_to_check_either_device(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = _doctor(tmp_path, capsys, _bar_that_slows())
    assert "on a GPU, check its utilisation (nvidia-smi) to confirm it waits; on the CPU, check what else uses its " \
        "cores (top)" in out and "steps that wait for their batch are fed too slowly" in out, out
