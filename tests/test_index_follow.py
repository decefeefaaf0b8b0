"""Huge logs (issue 15): the supervisor keeps events.idx current, a stale index is never trusted, and the
replay app's first frame does not wait for a saved index to load."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loratui import events, rundir
from loratui.eventlog import read_log
from loratui.logic.advisor import Advisor
from loratui.logic.runstate import RunState
from loratui.recipe import WATCHED
from loratui.sources import indexer, logindex
from loratui.sources.logindex import IndexedLog, idx_path
from loratui.supervisor.owner import Supervisor
from loratui.tui.replay_app import Moved, replay_app
from tests import scenarios

sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))
import replay_open  # noqa: E402


def _log(tmp_path: Path, hours: float = 0.25, steps: int = 1500) -> Path:
    path = tmp_path / "events.jsonl"
    replay_open.write_log(path, hours, steps)
    return path


def _fresh(path: Path) -> tuple[RunState, list[tuple[str, int]]]:
    found = read_log(path).events
    return RunState().feed_all(found), [(i.id, i.step) for i in Advisor().feed_all(found).items()]


def _seen(log: IndexedLog) -> tuple[RunState, list[tuple[str, int]]]:
    state, advisor = log.fold_at(log.n_events)
    return state, [(i.id, i.step) for i in advisor.items()]


def _same(a: RunState, b: RunState) -> bool:
    return (a.n_events, a.step, a.state, repr(a.loss)) == (b.n_events, b.step, b.state, repr(b.loss))


@pytest.fixture
def short_runs() -> Iterator[Path]:
    """A runs directory with a short path (a control socket's path has at most 107 bytes)."""
    runs = Path(tempfile.mkdtemp(prefix="li-", dir="/tmp"))
    yield runs
    shutil.rmtree(runs, ignore_errors=True)


def test_a_supervisor_run_that_ends_leaves_an_index_of_the_whole_log(short_runs: Path) -> None:
    script = "import time\nfor i in range(3):\n    print('working', i, flush=True)\n    time.sleep(0.05)"
    settings = rundir.RunSettings(run_id="idx", name="idx", recipe_source="", recipe_dir=str(short_runs),
                                  command=[sys.executable, "-c", script], cwd=str(short_runs))
    placeholder = f'[model]\npath = "{WATCHED}"\n\n[data]\ndataset = "{WATCHED}"\n'
    run = rundir.create(short_runs, settings, placeholder)
    assert Supervisor(run, None, "no GPU in this test").main() == 0
    # What `loratui replay` opens: the run's recipe keys the index, and it must fit the log as it ended.
    log = IndexedLog.of_file(run.events, run.load_recipe()[0])
    assert log.load_saved(), "no events.idx (or one that does not fit the log) after the run"
    assert log.index.end_pos == run.events.stat().st_size
    assert log.n_events == len(read_log(run.events).events)
    state, _ = log.fold_at(log.n_events)
    assert state.state == events.FINISHED and "working 2" in "\n".join(state.output_tail)
    assert not list(run.path.glob(".events.idx.*"))  # no temp file left behind


def test_an_index_saved_mid_run_is_extended_after_a_crash(tmp_path: Path) -> None:
    path = _log(tmp_path)
    whole = path.read_bytes()
    cut = whole.index(b"\n", len(whole) // 3) + 1
    path.write_bytes(whole[:cut])
    run = rundir.RunDir(tmp_path)
    done = threading.Event()
    done.set()  # the supervisor died at once: the indexer indexes what there is, saves, and exits
    indexer.follow(run, done, interval=0)
    with open(path, "ab") as out:  # the orphaned trainer wrote on
        out.write(whole[cut:])
    log = IndexedLog.of_file(path)
    assert log.load_saved() and log.index.end_pos == cut  # the saved part is taken...
    log.update()
    assert log.index.end_pos == len(whole)  # ...and extended from where it stops
    state, advice = _seen(log)
    fresh_state, fresh_advice = _fresh(path)
    assert _same(state, fresh_state) and advice == fresh_advice


def test_a_follower_saves_when_the_log_grew_enough_and_at_the_end(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path = _log(tmp_path)
    whole = path.read_bytes()
    cut = whole.index(b"\n", len(whole) // 2) + 1
    small = whole.index(b"\n", cut + 1000) + 1  # far less than a tenth of the log
    path.write_bytes(whole[:cut])
    log = IndexedLog.of_file(path)
    log.follower = True
    log.update()
    assert not idx_path(path).exists()  # a few MB: not worth a save until the end
    monkeypatch.setattr(logindex, "FOLLOW_SAVE_BYTES", 1)
    log.update()  # all of it unsaved: over a tenth, saved
    saved = idx_path(path).stat().st_ino
    with open(path, "ab") as out:
        out.write(whole[cut:small])
    log.update()
    assert idx_path(path).stat().st_ino == saved  # not rewritten for a few events
    assert log.save()  # the end: always saved
    again = IndexedLog.of_file(path)
    assert again.load_saved() and again.index.end_pos == small and again.index.tail.index == again.n_events


def test_a_followed_log_keeps_its_checkpoints_few_and_right(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logindex, "CHECKPOINTS", 4)  # a followed log starts small: spacing of a small log
    monkeypatch.setattr(logindex, "MIN_SPACING", 64)
    path = _log(tmp_path)
    whole = path.read_bytes()
    path.write_bytes(whole[:whole.index(b"\n", 4000) + 1])
    log = IndexedLog.of_file(path, cache=False)
    log.follower = True
    first_spacing = log.index.spacing
    with open(path, "ab") as out:
        for start in range(path.stat().st_size, len(whole), 20000):
            out.write(whole[start:start + 20000])
            out.flush()
            log.update()
    log.update()
    assert log.index.end_pos == len(whole) and log.index.spacing > first_spacing
    assert len(log.index.checkpoints) <= 2 * 4 + 1  # thinned as it grew, not one per 64 events
    found = read_log(path).events
    for count in (len(found), len(found) // 3, 65, 0):
        assert _same(log.fold_at(count)[0], RunState().feed_all(found[:count])), count


def _pad_to(end: int, start: int, t: float) -> bytes:
    """One output line that ends exactly at byte `end` when written at byte `start`."""
    line = events.encode(events.Output(t=t, stream="stdout", lines=[""]))
    pad = end - start - len(line)
    assert pad >= 0
    return events.encode(events.Output(t=t, stream="stdout", lines=["x" * pad]))


def test_a_log_truncated_and_rewritten_past_its_index_gets_a_new_index(tmp_path: Path) -> None:
    path = _log(tmp_path)
    IndexedLog.of_file(path).update()  # saved: the index ends where the log ends
    end = path.stat().st_size
    whole = path.read_bytes()
    cut = whole.index(b"\n", end // 2) + 1
    # Another run's tail after the same first half, with a line ending exactly where the index ends: the
    # same first bytes, long enough, a newline at the index's end. Only the bytes before that end differ.
    other = b"".join(events.encode(e) for e in scenarios.nan_run()[10:])
    t = read_log(path).events[-1].t
    rewritten = whole[:cut] + other
    rewritten += _pad_to(end, len(rewritten), t) + events.encode(events.End(t=t, state=events.FAILED))
    path.write_bytes(rewritten)
    assert rewritten[end - 1:end] == b"\n" and len(rewritten) > end
    log = IndexedLog.of_file(path)
    assert not log.load_saved()  # detected: the log does not hold what the index indexed
    log.update()
    state, advice = _seen(log)
    fresh_state, fresh_advice = _fresh(path)
    assert _same(state, fresh_state) and advice == fresh_advice
    assert state.state == events.FAILED and 35 in state.nan_steps


def test_a_truncated_index_file_is_rebuilt(tmp_path: Path) -> None:
    path = _log(tmp_path)
    IndexedLog.of_file(path).update()
    idx = idx_path(path)
    idx.write_bytes(idx.read_bytes()[: idx.stat().st_size // 2])  # a torn copy
    log = IndexedLog.of_file(path)
    assert not log.load_saved()
    log.update()
    assert _same(_seen(log)[0], _fresh(path)[0])


async def test_the_first_frame_does_not_wait_for_the_saved_index(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    path = _log(tmp_path)
    IndexedLog.of_file(path).update()  # the index a supervisor left
    release, order = threading.Event(), []
    real = logindex.load_index

    def slow_load(*args: Any) -> Any:  # a 60 MB index on a busy machine
        release.wait(60)  # released once the first frame is seen (without the fix: never, until this)
        order.append("index loaded")
        return real(*args)

    monkeypatch.setattr(logindex, "load_index", slow_load)
    app = replay_app(IndexedLog.of_file(path), None, "huge", speed=10)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(1500):  # bounded polls, not a timing: the loop ends when the header is shown
            if app.run_state.run_id:
                break
            await pilot.pause(0.02)
        order.append("first frame")
        assert app.run_state.run_id == "bench"  # the header is shown while the index loads
        assert "loading the index" in app.status_extra()
        release.set()
        await pilot.press("G")
        for _ in range(3000):
            if app.run_state.end is not None:
                break
            await pilot.pause(0.02)
        assert _same(app.run_state, _fresh(path)[0])  # the seek is right once the index is in
    assert order == ["first frame", "index loaded"]


async def test_a_tick_read_before_a_seek_lands_is_not_folded_on_top_of_it(tmp_path: Path) -> None:
    """CI once saw 'starting' with 11 961 of 11 959 events after G: the clock's tick read the first
    events at the old cursor and posted them, the seek's `Moved` (queued before) moved the cursor, and
    the posted batch was folded after it. Here both are made to happen in that order on purpose."""
    path = _log(tmp_path)
    log = IndexedLog.of_file(path)
    log.update()
    app = replay_app(log, None, "huge", speed=1000)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        end_state, advisor = app.replay.fold_at(log.n_events)
        app.replay.move_to(1, time.monotonic())  # the cursor near the start, the clock playing
        app.replay.clock.play(time.monotonic())
        app.post_message(Moved(end_state, advisor, log.n_events, seek=app._seeks))  # not yet handled
        time.sleep(0.05)  # events are due at the old cursor
        app._tick()  # the timer fires before the queued Moved is handled
        await pilot.pause()
        await pilot.pause()
        assert app.replay.cursor == log.n_events
        assert _same(app.run_state, _fresh(path)[0])


def test_a_save_sweeps_the_temp_file_a_killed_writer_left(tmp_path: Path) -> None:
    path = _log(tmp_path)
    left = tmp_path / ".events.idx.999999.1.tmp"
    fresh = tmp_path / ".events.idx.999998.1.tmp"  # another writer's, being filled now
    left.write_bytes(b"half an index")
    fresh.write_bytes(b"a quarter")
    old = time.time() - 2 * logindex.STALE_TMP_S
    os.utime(left, (old, old))
    IndexedLog.of_file(path).update()
    assert not left.exists() and fresh.exists() and idx_path(path).is_file()
