"""A run named by the time part of its id, as a user types it from `loratui ls` (trial 13: `loratui attach 004953`
for `20261206-004953-tiny` said "no run named '004953'", though a prefix or a suffix of the id worked)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loratui import events, rundir
from loratui.cli import main
from loratui.eventlog import EventWriter

IDS = ["20261205-004953-night", "20261206-004953-tiny", "20261206-005402-nosuch", "20261206-005412-other"]


def _runs(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    for n, run_id in enumerate(IDS):
        (runs / run_id).mkdir(parents=True)
        log = EventWriter(runs / run_id / "events.jsonl")
        log.write(events.Header(t=100.0 + n, schema=1, run_id=run_id, recipe_hash="h", name=run_id[16:]))
        log.write(events.End(t=110.0 + n, state=events.FINISHED, exit_code=0, step=1))
        log.close()
    return runs


@pytest.mark.parametrize(("typed", "run_id"), [("005402", IDS[2]), ("00:54:02", IDS[2]), ("0054:12", IDS[3]),
                                               ("00:5412", IDS[3]), ("005412", IDS[3])])
def test_the_time_part_of_an_id_names_its_run(tmp_path: Path, typed: str, run_id: str) -> None:
    assert rundir.resolve(typed, _runs(tmp_path)).run_id == run_id


@pytest.mark.parametrize(("typed", "fits"), [("004953", "2 runs"), ("00:54", "2 runs"), ("0054", "2 runs")])
def test_a_time_that_fits_several_runs_is_refused_with_them(tmp_path: Path, typed: str, fits: str) -> None:
    with pytest.raises(rundir.RunNotFound, match=f"'{typed}' fits {fits}"):
        rundir.resolve(typed, _runs(tmp_path))


@pytest.mark.parametrize("typed", ["005", "00:5", "2400", "00:54:0"])
def test_a_time_that_fits_no_run_is_no_run(tmp_path: Path, typed: str) -> None:
    with pytest.raises(rundir.RunNotFound, match="no run named"):
        rundir.resolve(typed, _runs(tmp_path))


def test_attach_takes_the_time_part(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["attach", "00:54:12", "--headless", "--runs-dir", str(_runs(tmp_path))]) == 0
    assert IDS[3] in capsys.readouterr().out
