"""One hostile line in a log (issue 25 item 14): a 100k-deep array, `step = 10**30`, a time of 1e308.
It is skipped with a note; `ls`, replay, attach, doctor and the replay app go on with the rest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loratui import eventlog, events, rundir
from loratui.eventlog import EventWriter
from tests import scenarios
from tests.conftest import TINY, loratui

DEEP = 100_000
HOSTILE = {
    "deep_log": b'{"kind":"log","t":5,"step":1,"values":{"a":' + b"[" * DEEP + b"]" * DEEP + b"}}",
    "deep_newer_kind": b'{"kind":"zzz","t":5,"x":' + b"[" * DEEP + b"]" * DEEP + b"}",
    "deep_object": b'{"kind":"step","t":5,"x":' + b'{"a":' * DEEP + b"1" + b"}" * DEEP + b"}",
    "huge_step": b'{"kind":"step","t":5,"step":' + str(10**30).encode() + b',"epoch":0,"step_time":1}',
    "huge_max_steps": b'{"kind":"train_begin","t":5,"max_steps":' + str(10**30).encode() + b',"num_epochs":1}',
    "huge_sample": (b'{"kind":"sample","t":5,"gpu":0,"used_max":' + str(10**30).encode()
                    + b',"used_last":1,"used_min":1,"total":1}'),
    "huge_time": b'{"kind":"state","t":1e308,"state":"training"}',
}


def _run_with(runs: Path, name: str, lines: list[bytes]) -> Path:
    """A recorded run (header, 5 steps) with `lines` appended after its last event."""
    settings = rundir.RunSettings(run_id=name, name=name, recipe_source=str(TINY))
    run = rundir.create(runs, settings, TINY.read_text())
    writer = EventWriter(run.events)
    for event in scenarios.run(5, max_steps=5):
        writer.write(event)
    writer.close()
    with open(run.events, "ab") as handle:
        handle.write(b"".join(line + b"\n" for line in lines))
    return run.path


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_one_hostile_line_is_skipped_and_counted(tmp_path: Path, name: str) -> None:
    run = _run_with(tmp_path / "runs", name, [HOSTILE[name]])
    contents = eventlog.read_log(run / "events.jsonl")
    healthy = len(scenarios.run(5, max_steps=5))
    assert len(contents.events) == healthy
    assert contents.skipped + contents.malformed + contents.unknown == 1, contents.notes()
    assert events.decode_line(HOSTILE[name]) is None or isinstance(events.decode_line(HOSTILE[name]),
                                                                   events.Unknown)


def _no_crash(result: object) -> None:
    stderr = result.stderr  # type: ignore[attr-defined]
    assert "internal error" not in stderr and "Traceback" not in stderr, stderr[-1500:]


def test_hostile_lines_never_break_ls_replay_attach_doctor(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _run_with(runs, "healthy", [])
    _run_with(runs, "hostile", list(HOSTILE.values()))
    for args in (["ls"], ["ls", "--json"]):
        result = loratui(*args, "--runs-dir", str(runs))
        assert result.returncode == 0, result.stderr
        _no_crash(result)
        assert "healthy" in result.stdout and "hostile" in result.stdout
    assert {row["run"] for row in json.loads(result.stdout)} == {"healthy", "hostile"}
    summary = loratui("replay", "hostile", "--summary", "--runs-dir", str(runs))
    _no_crash(summary)
    assert summary.returncode == 0 and json.loads(summary.stdout)["steps"] == 5
    assert "skipped" in json.loads(summary.stdout)["skipped"]
    for args in (["replay", "hostile", "--headless"], ["attach", "hostile", "--headless"],
                 ["doctor", "hostile"]):
        result = loratui(*args, "--runs-dir", str(runs))
        _no_crash(result)
        assert "skipped" in result.stdout + result.stderr, (args, result.stdout, result.stderr)


async def test_replay_app_plays_a_log_with_hostile_lines(tmp_path: Path) -> None:
    from loratui.commands.replay import _open
    from loratui.tui.replay_app import replay_app

    runs = tmp_path / "runs"
    _run_with(runs, "hostile", list(HOSTILE.values()))
    opened = _open("hostile", runs)
    app = replay_app(opened.complete(), opened.recipe, opened.title, speed=1000)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(400):
            await pilot.pause(0.05)
            if app.replay.done:
                break
        assert app.replay.done and app.run_state.step == 5
    assert "skipped" in opened.notes_text()
