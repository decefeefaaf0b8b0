"""`doctor` of a `loratui run --headless` log (a Slurm job's `%x-%j.out`): its progress line shows the last logged
loss on every line until the next log, so a loaded box's lines a few steps apart repeat it. Trial 14's job log read
"Loss repeats: 14 of the last 40 values were seen before: the weights are not changing"."""

from __future__ import annotations

from pathlib import Path

import pytest

from loratui.cli import main


def _progress(losses: list[tuple[int, float]]) -> str:
    return "".join(f"training  [###########-------------] step {step}/4000  loss {loss:.4f}  tok/s 90  VRAM no GPU  "
                   f"ETA 30m39s\n" for step, loss in losses)


def test_the_headless_lines_repeating_the_last_logged_loss_are_no_flat_loss(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines: list[tuple[int, float]] = []
    step = 1500
    for n in range(20):  # a log every 5 steps; two or three progress lines show each
        loss = 2.95 + (n % 7) / 100 + n / 1000
        for _ in range(2 + n % 2):
            step += 2
            lines.append((step, round(loss, 4)))
    out = tmp_path / "tiny-lora-131.out"
    out.write_text("run 20261206-005826-train in /home/me/runs/20261206-005826-train\n" + _progress(lines))
    main(["doctor", str(out)])
    said = capsys.readouterr().out
    assert "loss_flat" not in said and "seen before" not in said, said


def test_a_loss_that_truly_stands_still_in_its_own_lines_is_still_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Distinct logs with the same value (a frozen model's loss, logged again and again) are each a reading:
    only a line that shows the same values as the line before it is dropped."""
    lines = [(step, 2.3026 if step % 20 else 2.3027) for step in range(10, 800, 10)]
    out = tmp_path / "frozen.out"
    out.write_text(_progress(lines))
    main(["doctor", str(out)])
    assert "loss_flat" in capsys.readouterr().out


def test_a_line_before_the_first_log_gives_no_loss() -> None:
    """Trial 14: `loratui import` of a job's .out gave `"first_loss": 4000.0`: `step 4/4000  loss --` (no loss
    logged yet) was read as tinygrad's `<number> loss`, the counter's total taken for the loss."""
    from loratui.logic.text_reader import values

    assert values.loss_line("training  [------------------------] step 4/4000  loss --  tok/s 1475  VRAM no GPU  "
                            "ETA 3m14s") is None
    assert values.loss_line("failed    [------------------------] step 0/4000  loss --  tok/s --  VRAM no GPU  "
                            "ETA --") is None
    assert values.loss_line("11.8750 loss") == (None, {"loss": 11.875})  # tinygrad's own order still reads
