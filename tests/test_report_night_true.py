"""The morning report of a guarded night (trial 10: the trainer killed with SIGKILL, retried, killed again).

It said each guard move twice (the notice, then the alert's record of it: "transient failure, retrying: guard
retry 1 of 2 ...") and quoted the trainer's whole stderr tail as the run's end, a kernels-community message
and a FutureWarning included, where the end was "the trainer was killed by SIGKILL"."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from loratui import events
from loratui.cli import main
from loratui.eventlog import EventWriter

pytest.importorskip("matplotlib")

RETRY = ("guard retry 1 of 2 (transient: the process was killed by signal 9 with no Python error): recipe "
         "unchanged, restarting from checkpoint-30")
TAIL = ("the trainer was killed by SIGKILL\nFailed to load CPU gemm_4bit_forward from kernels-community: Kernel "
        "repository could not verify publisher trust status.\n/venv/transformers/modeling_utils.py:3314: "
        "FutureWarning: `is_gradient_checkpointing` is deprecated\n  warnings.warn(")


def _night(runs: Path) -> Path:
    run = runs / "20261205-130445-night"
    run.mkdir(parents=True)
    shutil.copy(Path(__file__).resolve().parent.parent / "loratui" / "recipes" / "tiny.toml", run / "recipe.toml")
    log = EventWriter(run / "events.jsonl")
    found: list[events.AnyEvent] = [
        events.Header(t=100.0, schema=1, run_id=run.name, recipe_hash="h", name="night"),
        events.State(t=101.0, state=events.TRAINING, step=0)]
    found += [events.Log(t=101.0 + step / 10, step=step, values={"loss": 6.0 - step / 10}) for step in range(1, 31)]
    found += [events.Notice(t=110.0, level="warning", key="guard_retry", message=RETRY),
              events.Notice(t=110.0, level="error", key="alert", message="transient failure, retrying: " + RETRY),
              events.Notice(t=114.0, level="error", key="alert", message="hung: no step for 10 minutes"),
              events.End(t=115.0, state=events.FAILED, exit_code=-9, signal="SIGKILL", error=TAIL, step=30)]
    for event in found:
        log.write(event)
    log.close()
    return run


def test_the_report_tells_each_move_once_and_the_end_in_its_own_words(tmp_path: Path) -> None:
    run = _night(tmp_path / "runs")
    assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    happened = text.split("## What happened")[1].split("## Advice")[0]
    assert happened.count("guard retry 1 of 2") == 1, happened
    assert "hung: no step for 10 minutes" in text  # an alert with no notice of its own is told
    assert "| end | failed (the trainer was killed by SIGKILL) |" in text, text
    assert "ended failed: the trainer was killed by SIGKILL**" in text, text
    assert "kernels-community" not in text and "FutureWarning" not in text, text


def test_a_recovered_verdict_is_told(tmp_path: Path) -> None:
    """Trial 10, one kill: the retry worked and the log said "guard verdict: recovered: ...", an info notice,
    but the report's story kept warnings and errors only: the morning read "guard retry 1 of 2" then "ended
    finished", never whether the restart had recovered."""
    from loratui.logic.story import Story

    said = ("guard verdict: recovered: no GPU sampled: the peak was not checked; first loss 3.334 after resuming "
            "at step 30 vs 3.484 at the checkpoint (continuous); 3 steps since the restart")
    story = Story().feed_all([
        events.Header(t=100.0, schema=1, run_id="r", recipe_hash="h", name="night2"),
        events.Notice(t=110.0, level="warning", key="guard_retry", message=RETRY),
        events.Notice(t=120.0, level="info", key="guard_verdict", message=said),
        events.Notice(t=120.0, level="info", key="alert", message="recovered: " + said),
        events.Notice(t=121.0, level="info", key="estimate", message="estimate at the longest example: 36 MiB"),
        events.End(t=130.0, state=events.FINISHED, exit_code=0, step=50)])
    assert [m.text for m in story.moments] == ["started night2", RETRY, said, "ended finished"]


def test_a_run_that_ended_on_a_nan_loss_gets_its_report(tmp_path: Path) -> None:
    """Trial 14: `loratui report` of the README's NaN demo (float16, learning rate 0.9, guarded) ended in
    "internal error: TypeError: must be real number, not str": the summary spells a NaN loss "NaN" for JSON,
    and the report formatted that string as a number."""
    run = tmp_path / "runs" / "20261206-004819-nan"
    run.mkdir(parents=True)
    shutil.copy(Path(__file__).resolve().parent.parent / "loratui" / "recipes" / "tiny.toml", run / "recipe.toml")
    log = EventWriter(run / "events.jsonl")
    found: list[events.AnyEvent] = [
        events.Header(t=100.0, schema=1, run_id=run.name, recipe_hash="h", name="nan"),
        events.State(t=101.0, state=events.TRAINING, step=0),
        events.Log(t=102.0, step=1, values={"loss": 6.5733}),
        events.Log(t=103.0, step=2, values={"loss": 5.9}),
        events.Log(t=104.0, step=4, values={"loss": "NaN"}),
        events.End(t=105.0, state=events.FAILED, exit_code=1, error="crash loop", step=5)]
    for event in found:
        log.write(event)
    log.close()
    assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    assert "| loss | 6.5733 → NaN (min 5.9000 at step 2) |" in text, text


def test_a_run_with_no_finite_loss_says_so_in_its_report(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "20261206-004819-allnan"
    run.mkdir(parents=True)
    log = EventWriter(run / "events.jsonl")
    for event in (events.Header(t=100.0, schema=1, run_id=run.name, recipe_hash="h", name="allnan"),
                  events.Log(t=102.0, step=1, values={"loss": "NaN"}),
                  events.End(t=105.0, state=events.FAILED, exit_code=1, error="nan", step=1)):
        log.write(event)
    log.close()
    assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    assert "| loss | NaN → NaN (none finite) |" in text, text


def test_a_restarted_runs_chart_draws_each_life_on_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial 14, the guarded NaN demo restarted from the start: the report's loss chart drew one line from step 3
    back to step 1, and the learning rate's from step 5 back to 1."""
    from loratui.commands import report

    run = tmp_path / "runs" / "20261206-004819-nan"
    run.mkdir(parents=True)
    log = EventWriter(run / "events.jsonl")
    found: list[events.AnyEvent] = [events.Header(t=100.0, schema=1, run_id=run.name, recipe_hash="h", name="nan")]
    for life in range(2):
        found += [events.Log(t=101.0 + life * 10 + step, step=step,
                             values={"loss": 6.5 - step / 10, "learning_rate": 0.9 / (life + 1)}) for step in (1, 2, 3)]
    for event in found + [events.End(t=130.0, state=events.FAILED, exit_code=1, error="crash loop", step=3)]:
        log.write(event)
    log.close()
    drawn: list[list[list[float]]] = []
    monkeypatch.setattr(report, "_save", lambda fig, path: drawn.append(
        [list(line.get_xdata()) for ax in fig.axes for line in ax.get_lines()]) or True)
    assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 0
    loss_chart = drawn[0]
    assert loss_chart == [[1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 2, 3]], loss_chart  # two lives, loss and lr
    assert report.lives([(1, 6.5), (2, 6.4), (3, 6.1), (1, 6.5), (2, 6.3), (1, 6.5)]) == [
        [(1, 6.5), (2, 6.4), (3, 6.1)], [(1, 6.5), (2, 6.3)], [(1, 6.5)]]


def test_the_nan_steps_of_a_restarted_run_are_told_once(tmp_path: Path) -> None:
    """Trial 14, the guarded NaN demo: "Non-finite loss or gradient at steps 4, 5, 4, 5." """
    run = tmp_path / "runs" / "20261206-004819-nan"
    run.mkdir(parents=True)
    log = EventWriter(run / "events.jsonl")
    found: list[events.AnyEvent] = [events.Header(t=100.0, schema=1, run_id=run.name, recipe_hash="h", name="nan")]
    for life in range(2):
        found += [events.Log(t=101.0 + life * 10 + step, step=step, values={"loss": 6.5 if step < 4 else "NaN"})
                  for step in (1, 2, 3, 4, 5)]
    for event in found + [events.End(t=130.0, state=events.FAILED, exit_code=1, error="crash loop", step=5)]:
        log.write(event)
    log.close()
    assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    assert "Non-finite loss or gradient at steps 4, 5 (again after a restart)." in text, text


def test_an_out_that_cannot_be_a_folder_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trial 14: `loratui report RUN --out afile` (a file there) said "afile: File exists; pass another --runs-dir"."""
    run = _night(tmp_path / "runs")
    taken = tmp_path / "afile"
    taken.write_text("")
    assert main(["report", str(run), "--out", str(taken)]) == 2
    err = capsys.readouterr().err
    assert f"--out {taken}: File exists (a file is there); give a folder to write the report in" in err, err
    assert "--runs-dir" not in err
    assert main(["report", str(run), "--out", str(taken / "x")]) == 2
    assert "--runs-dir" not in capsys.readouterr().err
