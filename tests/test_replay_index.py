"""The replay's log index: seeks fold state and advice from the nearest checkpoint, a file is read a block
at a time, the index is saved beside the log and reused, extended or rebuilt as the log changes."""

from __future__ import annotations

import os
import pickle
import stat
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from loratui import events
from loratui.eventlog import read_log
from loratui.logic.advisor import Advisor
from loratui.logic.runstate import RunState
from loratui.sources import logindex
from loratui.sources.logindex import IndexedLog, idx_path, load_index
from loratui.sources.replay import Replay
from tests import scenarios

sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))
import replay_open  # noqa: E402


def _found() -> list[Any]:
    """A run with advice to give: a NaN at step 35 and memory over the line."""
    return scenarios.nan_run()


def _log(tmp_path: Path, hours: float = 0.25, steps: int = 1500) -> Path:
    path = tmp_path / "events.jsonl"
    replay_open.write_log(path, hours, steps)
    return path


def _ids(advisor: Advisor) -> list[tuple[str, int]]:
    return [(item.id, item.step) for item in advisor.items()]


def test_advice_at_any_position_equals_a_fresh_fold() -> None:
    found = _found()
    log = IndexedLog.of_list(found, spacing=64)
    for index in [len(found), 0, 1, 500, 64 * 7, 64 * 7 + 1, len(found) - 3, 130]:
        state, advisor = log.fold_at(index)
        assert _ids(advisor) == _ids(Advisor().feed_all(found[:index])), index
        assert state.step == RunState().feed_all(found[:index]).step
    assert _ids(log.fold_at(len(found))[1])[:1] == [("nan_loss", 35)]


def test_a_seek_feeds_the_advisor_from_the_nearest_checkpoint_only(monkeypatch: pytest.MonkeyPatch) -> None:
    found = _found()
    log = IndexedLog.of_list(found, spacing=64)
    fed = []
    real = Advisor.feed
    monkeypatch.setattr(Advisor, "feed", lambda self, event: (fed.append(event), real(self, event)))
    log.fold_at(len(found) - 1)
    assert 0 < len(fed) <= 64  # not the thousands of events before it


def test_fold_at_leaves_the_cursor_and_clock_to_the_handler() -> None:
    replay = Replay(_found())
    before = (replay.cursor, replay.clock.now(5.0))
    replay.fold_at(replay.n_events)  # what the seek worker calls, off the event loop
    assert (replay.cursor, replay.clock.now(5.0)) == before
    replay.move_to(replay.n_events, wall=5.0)  # what the handler does on the loop
    assert replay.cursor == replay.n_events and replay.clock.now(5.0) == replay.end_t


def test_a_file_seek_decodes_only_from_the_nearest_checkpoint(tmp_path: Path) -> None:
    log = IndexedLog.of_file(_log(tmp_path), cache=False)
    log.update()
    n, spacing = log.n_events, log.index.spacing
    per_block = max(b - a for a, b in zip(log.index.block_first, log.index.block_first[1:]))
    assert n > 5 * spacing and len(log.index.checkpoints) >= 5
    for target in (n - 10, n // 2 + 7, spacing * 3 + 5):
        log._cache.clear()
        log.decoded = 0
        state, _ = log.fold_at(target)
        assert log.decoded <= spacing + 2 * per_block, target
        assert state.n_events == target


def test_summary_streams_in_bounded_memory(tmp_path: Path) -> None:
    path = _log(tmp_path, hours=0.5, steps=2000)
    tracemalloc.start()
    log = IndexedLog.of_file(path, cache=False)
    log.update()
    log.fold_at(log.n_events)
    _, streamed = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    tracemalloc.start()
    whole = read_log(path).events
    _, held = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(whole) == log.n_events
    assert streamed < held / 2  # the events are never all alive at once


def test_a_file_opens_at_its_first_event_before_it_is_indexed(tmp_path: Path) -> None:
    path = _log(tmp_path)
    found = read_log(path).events
    replay = Replay(IndexedLog.of_file(path, cache=False))  # the app's first frame: no index yet
    assert replay.n_events == 0
    assert replay.clock.now(0.0) == found[0].t and replay.end_t == found[-1].t


def test_the_index_is_saved_reused_and_extended(tmp_path: Path) -> None:
    found = _found()
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(events.encode(e) for e in found[:1000]))
    first = IndexedLog.of_file(path)
    first.update()
    assert idx_path(path).is_file() and oct(idx_path(path).stat().st_mode & 0o777) == "0o600"
    again = IndexedLog.of_file(path)
    assert again.n_events == 0 and again.loading  # loaded by the first update, not before the first frame
    assert again.load_saved() and not again.loading
    assert again.n_events == 1000 and again.index.end_pos == path.stat().st_size  # nothing to read again
    with open(path, "ab") as out:  # the run went on
        out.write(b"".join(events.encode(e) for e in found[1000:]))
    grown = IndexedLog.of_file(path)
    assert grown.load_saved() and grown.n_events == 1000
    grown.update()
    assert grown.n_events == len(found)
    assert _ids(grown.fold_at(len(found))[1]) == _ids(Advisor().feed_all(found))
    assert repr(grown.fold_at(len(found))[0].loss) == repr(RunState().feed_all(found).loss)  # NaN != NaN


def test_a_rewritten_log_or_another_recipe_gets_a_new_index(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(events.encode(e) for e in _found()))
    IndexedLog.of_file(path).update()
    assert IndexedLog.of_file(path).load_saved()
    assert not IndexedLog.of_file(path, recipe=object()).load_saved()  # advice depends on the recipe
    path.write_bytes(b"".join(events.encode(e) for e in scenarios.run(5)))
    assert not IndexedLog.of_file(path).load_saved()


def test_an_index_others_may_write_or_naming_foreign_code_is_not_loaded(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(events.encode(e) for e in scenarios.run(5)))
    IndexedLog.of_file(path).update()
    idx = idx_path(path)
    key = logindex.index_key(path, None)
    assert load_index(idx, key, None) is not None
    idx.chmod(0o666)
    assert load_index(idx, key, None) is None
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, (f"touch {marker}",))

    idx.write_bytes(pickle.dumps(Evil()))
    idx.chmod(0o600)
    assert load_index(idx, key, None) is None and not marker.exists()


def test_an_index_this_user_did_not_sign_is_never_unpickled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run directory from a colleague's tarball unpacks as files we own: its events.idx (a pickle) must be
    signed by our own key to be read at all, or a crafted one would run code on `loratui replay`."""
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(events.encode(e) for e in scenarios.run(5)))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "theirs"))
    IndexedLog.of_file(path).update()  # written and signed by "them"
    idx, key = idx_path(path), logindex.index_key(path, None)
    assert load_index(idx, key, None) is not None and oct(stat.S_IMODE((tmp_path / "theirs" / "loratui" /
                                                                          "signing.key").stat().st_mode)) == "0o600"
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "ours"))
    unpickled: list[bool] = []
    monkeypatch.setattr(logindex.indexcodec, "decode", lambda *a: unpickled.append(True))
    assert load_index(idx, key, None) is None and unpickled == []
    data = idx.read_bytes()  # our key, their payload: a tag copied from elsewhere does not fit
    idx.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    assert load_index(idx, key, None) is None and unpickled == []
    monkeypatch.undo()
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "ours"))
    log = IndexedLog.of_file(path)
    log.update()  # rebuilt, and now ours
    assert load_index(idx, key, None) is not None


def _sign_and_write(idx: Path, payload: bytes) -> None:
    """What a signed index file holds, made with this user's own key (defence in depth: item 4 of issue 25)."""
    from loratui.userstate import new_signer

    signer = new_signer()
    assert signer is not None
    signer.update(payload)
    idx.write_bytes(logindex.SIGNED_MAGIC + signer.digest() + payload)
    idx.chmod(0o600)


def test_an_index_signed_with_the_users_own_key_runs_no_code(tmp_path: Path) -> None:
    """The red team's index: `builtins.getattr(loratui.rundir.os, "system")` through the old unpickler's
    allow-list. An index is msgpack now: nothing in it is ever called."""
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(events.encode(e) for e in scenarios.run(5)))
    marker = tmp_path / "ran"
    attack = (b"cbuiltins\ngetattr\n(cloratui.rundir\nos\nVsystem\ntR(V" + f"touch {marker}".encode()
              + b"\ntR.")
    idx, key = idx_path(path), logindex.index_key(path, None)
    _sign_and_write(idx, attack)
    assert load_index(idx, key, None) is None and not marker.exists()
    IndexedLog.of_file(path).update()  # rebuilt over it
    assert load_index(idx, key, None) is not None and not marker.exists()


@pytest.mark.parametrize("key", ["os:system", "builtins:getattr", "loratui.rundir:RunDir", "subprocess:Popen",
                                 "loratui.logic.nosuchmodule:X", "loratui.logic..x:X", "loratui.logic._x:X",
                                 "loratui.logic.runstate:_header", "loratui.logic.runstate:RunState.feed",
                                 "loratui.logic.runstate:events", "loratui.logic.runstate:inert"])
def test_an_index_naming_anything_but_an_index_class_is_refused(tmp_path: Path, key: str) -> None:
    import msgspec

    from loratui.sources import indexcodec

    crafted = msgspec.msgpack.encode([indexcodec.VERSION, [], msgspec.msgpack.Ext(7, msgspec.msgpack.encode(
        [key, {}]))])
    with pytest.raises(indexcodec.IndexCodecError):
        indexcodec.decode(crafted)
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(events.encode(e) for e in scenarios.run(5)))
    _sign_and_write(idx_path(path), crafted)
    assert load_index(idx_path(path), logindex.index_key(path, None), None) is None


def test_the_codec_keeps_types_and_shared_lists() -> None:
    from collections import deque

    from loratui.sources import indexcodec

    state = RunState().feed_all(_found())
    shared = state.loss
    value = {"a": (shared, len(shared)), "b": (shared, 3), "d": deque([1, 2], maxlen=5), "s": frozenset({"x"}),
             "state": state, "nested": [(1, [2, (3,)])]}
    back = indexcodec.decode(indexcodec.encode(value))
    assert back["a"][0] is back["b"][0] and repr(back["a"][0]) == repr(shared) and type(back["a"][0][0]) is tuple
    assert back["d"] == deque([1, 2]) and back["d"].maxlen == 5 and back["s"] == frozenset({"x"})
    assert back["nested"] == [(1, [2, (3,)])]
    assert repr(back["state"]) == repr(state)  # every field, events and deques included (NaN != NaN)


def test_a_damaged_signed_index_is_rebuilt_never_an_error(tmp_path: Path) -> None:
    """Every byte of a real index flipped in turn (and signed again, as a bug of ours could write it):
    the load says None or gives an index, and never raises."""
    import random

    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(events.encode(e) for e in scenarios.run(5)))
    IndexedLog.of_file(path).update()
    idx, key = idx_path(path), logindex.index_key(path, None)
    payload = idx.read_bytes()[len(logindex.SIGNED_MAGIC) + 32:]
    rng = random.Random(25)
    for position in sorted(rng.sample(range(len(payload)), min(300, len(payload)))):
        damaged = bytearray(payload)
        damaged[position] ^= 1 << rng.randrange(8)
        _sign_and_write(idx, bytes(damaged))
        loaded = load_index(idx, key, None)
        assert loaded is None or isinstance(loaded, logindex.LogIndex)
