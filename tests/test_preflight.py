"""Pre-flight at launch on scripted GPU figures: refuse what cannot fit the free memory, with a move."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from loratui import cli
from loratui.commands import launch_checks
from loratui.supervisor import preflight
from tests.fakes import GIB, ScriptedProbe, steady
from tests.test_priced_moves import QWEN7B

REPO = Path(__file__).resolve().parents[1]
H200 = int(139.8 * GIB)


def _recipe(tmp_path: Path) -> Path:
    """The issue's 38 GiB recipe: 7B bf16 LoRA, batch 1 x 2048, no checkpointing."""
    text = (REPO / "recipes/qwen7b.toml").read_text()
    text = text.replace("load_in_4bit = true", "load_in_4bit = false").replace(
        "per_device_train_batch_size = 4", "per_device_train_batch_size = 1").replace(
        "gradient_checkpointing = true", "gradient_checkpointing = false").replace(
        "max_length = 1024", "max_length = 2048").replace('optim = "paged_adamw_8bit"', 'optim = "adamw_torch"')
    text = text.replace('path = "data/tiny-instructions.jsonl"', f'path = "{REPO}/recipes/data/tiny-instructions.jsonl"')
    path = tmp_path / "bf16.toml"
    path.write_text(text)
    return path


def _busy_card() -> ScriptedProbe:
    """An H200 where another process holds all but 24 GiB."""
    return ScriptedProbe(used_at=steady(116), total=H200, procs={4242: H200 - 24 * GIB})


def test_a_recipe_over_the_free_memory_is_refused_with_the_holder_and_a_move(tmp_path: Path) -> None:
    from loratui.recipe import load_recipe

    verdict = preflight.check(load_recipe(_recipe(tmp_path)), QWEN7B, _busy_card())
    assert not verdict.fits and 36 < verdict.need_gib < 40
    assert "24.0 GiB free of 139.8" in verdict.message and "PID 4242 holds 115.8 GiB" in verdict.message
    assert verdict.move is not None and verdict.move.peak_gib <= 24.0
    assert verdict.move.change == {"training.gradient_checkpointing": True}
    assert "predicted peak" in verdict.message and "--force" in verdict.message


def test_a_recipe_that_fits_the_free_memory_passes(tmp_path: Path) -> None:
    from loratui.recipe import load_recipe

    idle = ScriptedProbe(used_at=steady(0.6), total=H200, procs={})
    assert preflight.check(load_recipe(_recipe(tmp_path)), QWEN7B, idle).fits


def test_without_a_process_list_the_device_used_figure_counts(tmp_path: Path) -> None:
    from loratui.recipe import load_recipe

    probe = ScriptedProbe(used_at=steady(120), total=H200, procs={})
    verdict = preflight.check(load_recipe(_recipe(tmp_path)), QWEN7B, probe)
    assert not verdict.fits and "19.8 GiB free" in verdict.message and "PID" not in verdict.message


def _args(tmp_path: Path, *extra: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(["run", str(_recipe(tmp_path)), "--runs-dir", str(tmp_path / "runs"),
                                          *extra])


def test_loratui_run_refuses_before_anything_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("loratui.supervisor.gpu.open_probe", lambda: (_busy_card(), ""))
    code = cli.main(["run", str(_recipe(tmp_path)), "--runs-dir", str(tmp_path / "runs"), "--headless"])
    err = capsys.readouterr().err
    assert code == 1 and "pre-flight" in err and "gradient_checkpointing = true" in err
    assert not (tmp_path / "runs").exists()  # no run directory, no supervisor, no weights loaded


def test_force_starts_anyway_and_no_gpu_means_no_preflight(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("loratui.supervisor.gpu.open_probe", lambda: (_busy_card(), ""))
    assert launch_checks.preflight(_args(tmp_path, "--force"))
    assert "starting anyway (--force)" in capsys.readouterr().err
    monkeypatch.setattr("loratui.supervisor.gpu.open_probe", lambda: (None, "NVML sees no GPU"))
    assert launch_checks.preflight(_args(tmp_path))

