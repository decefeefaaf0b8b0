"""Issue 26 item 1: runs are found wherever the user started them, not only under ./runs of the current
directory (a per-user list in the user's state directory); `--runs-dir` narrows to one place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loratui import rundir, userstate
from loratui.cli import main
from loratui.tui.app import farewell
from loratui.logic.runstate import RunState

LOG = "\n".join([*(f"{{'loss': {1.5 - i / 10}, 'grad_norm': 1.0, 'learning_rate': 2e-4}}" for i in range(5)),
                 # the summary says it finished (five dicts alone are a log that ends, at a step count unknown)
                 "{'train_runtime': 5.0, 'train_steps_per_second': 1.0, 'train_loss': 1.3}"])


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user of their own (state directory) with no LORATUI_RUNS, working in `~/proj`."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("LORATUI_RUNS", raising=False)
    (tmp_path / "proj").mkdir()
    monkeypatch.chdir(tmp_path / "proj")
    return tmp_path


def _start_one(home: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """A run made in ~/proj/runs (by `import`, which makes run directories as `run` does)."""
    log = home / "proj" / "train.log"
    log.write_text(LOG)
    assert main(["import", str(log)]) == 0
    run_id = capsys.readouterr().out.strip().splitlines()[-1]
    assert (home / "proj" / "runs" / run_id / "events.jsonl").is_file()
    return run_id


def test_ls_and_attach_find_a_run_started_in_another_directory(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    run_id = _start_one(home, capsys)
    monkeypatch.chdir(home)  # back over SSH, into ~
    assert main(["ls", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["run"] for r in rows] == [run_id]
    assert rows[0]["path"] == str((home / "proj" / "runs" / run_id).resolve())
    assert main(["attach", run_id, "--headless"]) == 0
    assert run_id in capsys.readouterr().out
    assert main(["attach", "--headless"]) == 0  # no name: the newest, wherever it is
    assert run_id in capsys.readouterr().out


def test_replay_doctor_and_report_find_a_run_started_in_another_directory(
        home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The lead's tmux trial: `loratui replay RUN` from ~ said 'no runs in runs/' while ls and attach found it."""
    run_id = _start_one(home, capsys)
    monkeypatch.chdir(home)
    assert main(["replay", run_id, "--summary"]) == 0
    assert json.loads(capsys.readouterr().out)["steps"] == 5
    assert main(["doctor", run_id]) in (0, 1)
    assert run_id in capsys.readouterr().out
    assert main(["report", run_id, "--out", str(home / "report")]) == 0
    assert (home / "report").is_dir()


def test_runs_dir_narrows_to_one_place(home: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    run_id = _start_one(home, capsys)
    monkeypatch.chdir(home)
    assert main(["ls", "--runs-dir", str(home / "elsewhere")]) == 0
    assert capsys.readouterr().out.strip() == f"no runs in {home / 'elsewhere'}/ (no such directory)"
    assert main(["attach", run_id, "--headless", "--runs-dir", str(home / "elsewhere")]) == 2
    assert f"no runs in {home / 'elsewhere'}/ (no such directory);" in capsys.readouterr().err
    (home / "elsewhere").mkdir()  # an empty one is only empty
    assert main(["ls", "--runs-dir", str(home / "elsewhere")]) == 0
    assert capsys.readouterr().out.strip() == f"no runs in {home / 'elsewhere'}/"
    (home / "elsewhere").rmdir()
    monkeypatch.setenv("LORATUI_RUNS", str(home / "elsewhere"))  # the variable names one place too
    assert main(["ls", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_ls_says_where_each_run_is_when_they_are_in_several_places(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    first = _start_one(home, capsys)
    (home / "other").mkdir()
    monkeypatch.chdir(home / "other")
    (home / "other" / "t.log").write_text(LOG)
    assert main(["import", str(home / "other" / "t.log"), "--name", "second"]) == 0
    capsys.readouterr()
    assert main(["ls"]) == 0
    out = capsys.readouterr().out
    assert "WHERE" in out and first in out and "second" in out
    assert str((home / "proj" / "runs").resolve()) in out and str((home / "other" / "runs").resolve()) in out


def test_ls_rows_fit_80_columns_in_one_place(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The trial at 80x24: the RUN column was 40 wide whatever the ids, so every row took 83 columns."""
    run_id = _start_one(home, capsys)
    assert main(["ls"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(run_id in line for line in lines) and all(len(line) <= 80 for line in lines), lines


def test_a_run_that_is_gone_is_not_listed(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_id = _start_one(home, capsys)
    (home / "proj" / "runs" / run_id / "events.jsonl").unlink()
    assert userstate.remembered_runs() == []
    assert rundir.list_runs(Path("nowhere"), everywhere=True) == []


def test_detach_message_names_the_run_directory(tmp_path: Path) -> None:
    run = rundir.RunDir(tmp_path / "runs" / "20261204-120000-tiny")
    said = farewell(run, RunState(), "detach")
    assert str(run.path.resolve()) in said and "loratui attach 20261204-120000-tiny" in said


def test_replay_finds_a_run_started_in_another_directory(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    run_id = _start_one(home, capsys)
    monkeypatch.chdir(home)
    assert main(["replay", run_id, "--summary"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert run_id in json.dumps(summary), summary
    assert main(["replay", run_id, "--summary", "--runs-dir", str(home / "elsewhere")]) == 2  # narrowed


def test_the_detach_message_keeps_each_command_on_one_80_column_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """At 80x24 the terminal broke the one-line detach message inside `loratui attach RUN`."""
    from loratui.logic.runstate import RunState
    from loratui.rundir import RunDir
    from loratui.tui.app import farewell

    run = RunDir(tmp_path / "runs" / "20261204-142104-qwen2.5-7b-instruct-qlora")
    lines = farewell(run, RunState(), "detach").splitlines()
    attach = next(line for line in lines if f"loratui attach {run.run_id}" in line)
    stop = next(line for line in lines if f"loratui stop {run.run_id}" in line)
    assert len(attach) <= 80 and len(stop) <= 80, lines
    assert lines[0].endswith(str(run.path.resolve()))


def test_ls_in_several_places_fits_an_80_column_terminal(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The trial at 80x24: the WHERE column pushed rows past 80 and the terminal cut each path in two, back at
    column 0. On a terminal each place now goes whole on a line of its own under its run (a path longer than
    the line itself is the terminal's to wrap)."""
    from tests.test_error_wrap import _on_terminal

    first = _start_one(home, capsys)
    deep = home / "x"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    (deep / "t.log").write_text(LOG)
    assert main(["import", str(deep / "t.log"), "--name", "second"]) == 0
    capsys.readouterr()
    shown = _on_terminal(["ls"], 80, home).splitlines()
    assert all(len(line) < 80 for line in shown if not line.startswith("  in ")), shown
    where = {str((home / "proj" / "runs").resolve()), str((deep / "runs").resolve())}
    assert {line.removeprefix("  in ") for line in shown if line.startswith("  in ")} == where, shown
    ids = {shown[1].split()[0], shown[3].split()[0]}
    assert first in ids and any(run.endswith("-second") for run in ids), shown


def test_import_says_the_next_step_and_the_commands_it_names_work(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`loratui import FILE` printed only the run id: it now names the commands that open the run (on stderr, so
    `id=$(loratui import FILE)` still gets the id alone), and they work from another directory."""
    log = home / "proj" / "train.log"
    log.write_text(LOG)
    assert main(["import", str(log)]) == 0
    printed = capsys.readouterr()
    run_id = printed.out.strip()
    assert f"loratui replay {run_id}" in printed.err and f"loratui doctor {run_id}" in printed.err, printed.err
    (home / "elsewhere").mkdir()
    monkeypatch.chdir(home / "elsewhere")
    assert main(["replay", run_id, "--summary"]) == 0
    assert json.loads(capsys.readouterr().out)["last_loss"] == pytest.approx(1.1)
    assert main(["doctor", run_id]) == 0


def test_a_long_run_id_keeps_every_ls_row_inside_an_80_column_terminal(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The trial at 80x24: one run of a long script's name (`finetune_llama3_8b_..._v2.py`) made the RUN column 75
    wide, so every row took 120 columns and the terminal broke each one in two. On a terminal an id too long for
    the line now goes whole on a line of its own, its figures under it; the others keep one line each."""
    from tests.test_error_wrap import _on_terminal

    short = _start_one(home, capsys)
    log = home / "proj" / "t.log"
    log.write_text(LOG)
    assert main(["import", str(log), "--name", "finetune_llama3_8b_instruct_with_qlora_on_alpaca_cleaned_v2"]) == 0
    long_id = capsys.readouterr().out.strip().splitlines()[-1]
    shown = _on_terminal(["ls"], 80, home).splitlines()
    assert all(len(line) < 80 for line in shown if line != long_id), shown
    assert long_id in shown and shown[shown.index(long_id) + 1].split()[:2] == ["finished", "5/5"], shown
    assert any(line.startswith(short) and "finished" in line for line in shown), shown
    assert main(["ls"]) == 0  # piped: one row a run, whatever its width (scripts read it)
    piped = capsys.readouterr().out.splitlines()
    assert any(line.startswith(long_id) and "finished" in line for line in piped), piped


@pytest.mark.parametrize(("state", "words"), [("paused", "stays paused"), ("suspended", "is suspended")])
def test_a_run_left_paused_or_suspended_is_not_said_to_train_on(tmp_path: Path, state: str, words: str) -> None:
    """A tmux trial: `p`, then `d`, and the shell was told "detached: training continues" of a paused run."""
    run = rundir.RunDir(tmp_path / "runs" / "20261205-192449-tiny")
    paused = RunState()
    paused.state = state
    lines = farewell(run, paused, "detach").splitlines()
    assert words in lines[0] and "training continues" not in "\n".join(lines)
    assert lines[0].endswith(str(run.path.resolve()))
    assert f"  loratui resume {run.run_id}" in lines and all(len(line) <= 80 for line in lines[1:])


def test_replay_with_no_run_named_takes_the_newest(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`loratui replay` alone gave argparse's usage, where `attach` alone takes the newest run."""
    run_id = _start_one(home, capsys)
    monkeypatch.chdir(home)
    assert main(["replay", "--summary"]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == run_id
    assert main(["replay", "--summary", "--runs-dir", str(home / "elsewhere")]) == 2
    assert "no runs in" in capsys.readouterr().err
