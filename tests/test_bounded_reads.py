"""Every read is bounded (issue 25 item 16): a FIFO or device where a file should be is refused at once
(never waited on), a data file that is one endless line is refused at its line, and the pre-flight data
check stops at its byte and time bounds with a note."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from loratui import bounds, rundir
from loratui.eventlog import EventWriter
from loratui.recipe import RecipeError, load_recipe
from loratui.supervisor import launch
from tests import scenarios
from tests.conftest import TINY, loratui

RUN_FILES = ["status.json", "run.json", "supervisor.pid", "trainer.pid", "events.idx"]
EXAMPLE = b'{"instruction": "Reverse the word: forest", "input": "", "output": "tserof"}\n'


def _run_with_fifo(runs: Path, name: str) -> None:
    run = rundir.create(runs, rundir.RunSettings(run_id=f"fifo-{name}", name="x", recipe_source=str(TINY)),
                        TINY.read_text())
    writer = EventWriter(run.events)
    for event in scenarios.run(3):
        writer.write(event)
    writer.close()
    (run.path / name).unlink(missing_ok=True)
    os.mkfifo(run.path / name)


def _one_line_or_none(result: object) -> None:
    stderr = result.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in stderr and "internal error" not in stderr and stderr.count("\n") <= 1, stderr


def test_fifos_in_a_run_directory_hang_no_command(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for name in RUN_FILES:
        _run_with_fifo(runs, name)
    listed = loratui("ls", "--json", "--runs-dir", str(runs), timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert {row["run"] for row in json.loads(listed.stdout)} == {f"fifo-{name}" for name in RUN_FILES}
    for name in RUN_FILES:
        for args in (["attach", f"fifo-{name}", "--headless"], ["stop", f"fifo-{name}"],
                     ["replay", f"fifo-{name}", "--summary"], ["doctor", f"fifo-{name}"]):
            _one_line_or_none(loratui(*args, "--runs-dir", str(runs), timeout=60))  # a hang raises Timeout


def test_a_recipe_that_is_a_fifo_is_refused_by_estimate_and_run(tmp_path: Path) -> None:
    fifo = tmp_path / "recipe.toml"
    os.mkfifo(fifo)
    for args in (["estimate", str(fifo)], ["run", str(fifo), "--headless", "--runs-dir", str(tmp_path / "runs")]):
        result = loratui(*args, timeout=60)
        assert result.returncode == 2 and "not a regular file (a FIFO)" in result.stderr, result.stderr
        _one_line_or_none(result)
    with pytest.raises(RecipeError, match="not a regular file"):
        load_recipe(fifo)


def _recipe_with_data(tmp_path: Path, data: Path) -> Path:
    recipe = tmp_path / "r.toml"
    recipe.write_text(TINY.read_text().replace('path = "data/tiny-instructions.jsonl"', f'path = "{data}"'))
    return recipe


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_data_path_that_is_not_a_file_is_refused_before_the_start(tmp_path: Path, kind: str) -> None:
    data = tmp_path / "data.jsonl"
    if kind == "fifo":
        os.mkfifo(data)
    else:
        data.symlink_to("/dev/zero")
    recipe = _recipe_with_data(tmp_path, data)
    result = loratui("run", str(recipe), "--headless", "--runs-dir", str(tmp_path / "runs"), timeout=60)
    assert result.returncode == 2, result.stderr
    assert f"`data.path`: {data}: cannot read it (not a regular file (a {'FIFO' if kind == 'fifo' else 'device'})" \
        in result.stderr
    _one_line_or_none(result)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_an_endless_line_is_refused_at_its_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounds, "MAX_LINE", 1 << 20)
    data = tmp_path / "data.jsonl"
    # line 2: one valid example 3 MiB long (the check reads at most 1 MiB of it)
    data.write_bytes(EXAMPLE + b'{"instruction": "' + b"x" * (3 << 20) + b'", "output": "y"}\n')
    recipe_path = _recipe_with_data(tmp_path, data)
    with pytest.raises(RecipeError, match=rf"{data}:2: line 2 is over 1 MiB long"):
        launch.check_data(load_recipe(recipe_path), recipe_path)


def test_the_data_check_stops_at_its_byte_bound_with_a_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(launch, "CHECK_BYTES", 64 << 10)
    data = tmp_path / "data.jsonl"
    data.write_bytes(EXAMPLE * 20_000 + b"not json\n")  # 1.5 MiB; the bad last line is past the bound
    recipe_path = _recipe_with_data(tmp_path, data)
    launch.check_data(load_recipe(recipe_path), recipe_path)
    note = capsys.readouterr().err
    assert f"note: checked the first {(64 << 10) // len(EXAMPLE) + 1} examples of {data}" in note
    assert "the trainer checks the rest" in note


def test_long_lines_are_not_split_as_table_rows() -> None:
    """The fuzz test's `import` of a log with 100 kB event lines hung past its 20 s on a loaded box: every
    line was split as a possible loss-table row (0.1 s each). No table row is that long."""
    import time

    from loratui.logic.text_reader.table import TextTables, text_table

    row = '{"kind": "sample", "gpu": 0, "used_max": 1  ' + "y y  | " * 15_000 + "}"
    began = time.process_time()  # CPU time: a loaded box stretches the wall clock, not this
    assert text_table(["Step  Training Loss", "1  2.5"] + [row] * 400) is not None
    assert time.process_time() - began < 2.0  # 400 such lines took 12 s on this box when each was split
    assert len(row) > TextTables.MAX_LINE
