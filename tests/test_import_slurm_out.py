"""`loratui import` of a Slurm job's .out cut at its time limit (trial 14): the last step seen was taken for the
run's step count, so a job killed at step 40 of 60 was imported as finished at 40/40. The step count comes from
what the log says (the training bar's total, the summary), else it is unknown; a dataset's preprocessing bar
(`Tokenizing train dataset: 400/400`) is no step count either."""

from __future__ import annotations

from pathlib import Path

import pytest

from loratui import events
from loratui.logic.runstate import RunState
from loratui.sources.importers import import_path

LIMIT = "slurmstepd: error: *** JOB 4242 ON node7 CANCELLED AT 2026-12-06T03:10:00 DUE TO TIME LIMIT ***\n"
PREP = "".join(f"{what} train dataset: 100%|██████████| 400/400 [00:00<00:00, 13325.62 examples/s]\n"
               for what in ("Adding EOS to", "Tokenizing", "Truncating"))


def _dict(step: int) -> str:
    return (f"{{'loss': '{4.2 - step / 100:.3f}', 'grad_norm': '0.2', 'learning_rate': '0.002', "
            f"'epoch': '{step / 50:g}'}}\n")


def _imported(tmp_path: Path, text: str) -> RunState:
    path = tmp_path / "qwen-lora-4242.out"
    path.write_text(text)
    return RunState().feed_all(import_path(path))


def test_step_lines_cut_at_the_limit_are_not_a_finished_run(tmp_path: Path) -> None:
    text = "".join(f"step {step} | loss {4.2 - step / 100:.3f} | lr 2e-3\n" for step in range(5, 45, 5)) + LIMIT
    state = _imported(tmp_path, text)
    assert state.step == 40 and state.max_steps == 0, (state.step, state.max_steps)
    assert state.end is not None and state.end.state == events.FAILED  # TIMEOUT: see the last test
    assert any("ends at step 40 of ?" in n.message for n in state.notices)


def test_dicts_after_dataset_bars_take_no_step_count_from_them(tmp_path: Path) -> None:
    state = _imported(tmp_path, PREP + "".join(_dict(step) for step in range(5, 45, 5)) + LIMIT)
    assert state.max_steps == 0, state.max_steps  # was 400: the dataset bar's examples
    assert state.end is not None and state.end.state == events.FAILED  # TIMEOUT: see the last test


def test_the_training_bars_total_is_the_step_count(tmp_path: Path) -> None:
    bars = "".join(f" {step * 100 // 60}%|█   | {step}/60 [00:{step // 2:02d}<00:10,  2.38it/s]\n" + (
        _dict(step) if step % 5 == 0 else "") for step in range(1, 41))
    state = _imported(tmp_path, PREP + bars + LIMIT)
    assert (state.step, state.max_steps) == (40, 60)
    assert state.end is not None and state.end.state == events.FAILED  # TIMEOUT: see the last test


def test_a_finished_run_without_bars_still_ends_finished(tmp_path: Path) -> None:
    summary = "{'train_runtime': '33.56', 'train_samples_per_second': '14.3', 'train_steps_per_second': '1.192', " \
              "'train_loss': '3.951', 'epoch': '0.8'}\n"
    state = _imported(tmp_path, "".join(_dict(step) for step in range(5, 45, 5)) + summary)
    assert state.max_steps == 40 and state.end is not None and state.end.state == events.FINISHED


def test_slurms_own_line_says_who_ended_the_job(tmp_path: Path) -> None:
    """The .out's slurmstepd line (`CANCELLED ... DUE TO TIME LIMIT`) is the run's end, as a live run records it:
    `doctor` said "no problems found" of an imported job that Slurm killed at its time limit."""
    from loratui.logic.advisor import Advisor

    found = import_path(_write(tmp_path, PREP + "".join(_dict(step) for step in range(5, 45, 5)) + LIMIT))
    state = RunState().feed_all(found)
    assert state.end is not None and (state.end.state, state.end.cause) == (events.FAILED, "TIMEOUT")
    assert state.end.error.startswith("Slurm: job 4242 TIMEOUT: the job reached its time limit")
    (first, *_) = Advisor(None).feed_all(found).items()
    assert first.id == "scheduler_end" and "TIMEOUT" in first.title, first
    requeued = LIMIT.replace("TIME LIMIT", "JOB REQUEUE") + "".join(_dict(step) for step in range(45, 60, 5))
    state = RunState().feed_all(import_path(_write(tmp_path, PREP + _dict(5) + requeued)))
    assert state.end is not None and state.end.cause == "" and state.end.state == events.STOPPED
    preempted = LIMIT.replace("TIME LIMIT", "PREEMPTION") + "".join(_dict(step) for step in range(45, 60, 5))
    state = RunState().feed_all(import_path(_write(tmp_path, PREP + _dict(5) + preempted)))  # requeued, went on
    assert state.end is not None and state.end.cause == "" and state.end.state == events.STOPPED


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job-4242.out"
    path.write_text(text)
    return path


def test_doctor_on_a_jobs_out_gives_slurms_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`loratui doctor job.out`, the file itself: "no problems found" of a job Slurm killed at its time limit."""
    from loratui.cli import main

    path = _write(tmp_path, PREP + "".join(_dict(step) for step in range(5, 45, 5)) + LIMIT)
    assert main(["doctor", str(path)]) == 1
    out = capsys.readouterr().out
    assert "scheduler_end" in out and "Slurm ended the job (TIMEOUT)" in out, out
    for due in ("JOB REQUEUE", "PREEMPTION"):  # no end, or one the job's next start went on from
        path.write_text(PREP + _dict(5) + LIMIT.replace("TIME LIMIT", due) + _dict(10))
        assert main(["doctor", str(path)]) == 0 and "no problems found" in capsys.readouterr().out


def test_an_empty_file_is_called_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`loratui import` of an empty file (a job's .out before it printed anything) listed every kind of record it
    is not: "none of: events.jsonl, trainer_state.json, ..."."""
    from loratui.cli import main

    for text in ("", "\n  \n"):
        assert main(["import", str(_write(tmp_path, text)), "--runs-dir", str(tmp_path / "runs")]) == 2
        err = capsys.readouterr().err
        assert "job-4242.out: empty, nothing to import" in err and "none of" not in err, err


def _lightning(epochs: int, cut: int = 0) -> str:
    lines = [f"Epoch {epoch}: {n * 10:3d}%|{'█' * n}{' ' * (10 - n)}| {n}/10 [00:01<00:00,  8.00it/s, v_num=0, "
             f"train_loss={2.5 - epoch * 0.3 - n * 0.01:.3f}]" for epoch in range(epochs) for n in range(1, 11)]
    lines.append(f"`Trainer.fit` stopped: `max_epochs={epochs}` reached.")
    return "\n".join(lines[:cut] if cut else lines) + "\n"


def test_a_lightning_log_is_finished_when_lightning_says_so(tmp_path: Path) -> None:
    """Lightning's bar counts an epoch's batches, no run's steps: a log cut after 15 of 20 steps was imported as
    finished at 15/15; the whole log ends with Lightning's own word that the fit reached its end."""
    state = RunState().feed_all(import_path(_write(tmp_path, _lightning(2, cut=15))))
    assert (state.step, state.max_steps) == (15, 0) and state.end is not None
    assert state.end.state == events.STOPPED
    state = RunState().feed_all(import_path(_write(tmp_path, _lightning(2))))
    assert (state.step, state.max_steps) == (20, 20) and state.end is not None
    assert state.end.state == events.FINISHED
