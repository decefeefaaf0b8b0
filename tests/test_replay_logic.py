"""The replay reader: clock pacing, seeking, events of note, and damaged or newer logs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loratui import events
from loratui.eventlog import read_log
from loratui.logic.runstate import RunState
from loratui.sources.replay import SPEEDS, Replay, ReplayClock

T0 = 1000.0
ROOT = Path(__file__).parent.parent


def _run(steps: int = 40, nan_at: int = 25) -> list[Any]:
    """A run of `steps` one-second steps with 10 Hz samples, a pause, an eval and a save."""
    found: list[Any] = [events.Header(t=T0, schema=1, run_id="r", recipe_hash="h"),
                        events.TrainBegin(t=T0, max_steps=steps, num_epochs=1.0),
                        events.State(t=T0, state=events.TRAINING)]
    for step in range(1, steps + 1):
        t = T0 + step
        found += [events.Sample(t=t - 0.5 + k / 10, gpu=0, used_max=step << 20, used_last=step << 20,
                                used_min=0, total=1 << 30, util=90) for k in range(5)]
        found.append(events.Step(t=t, step=step, epoch=step / steps, step_time=1.0, peak_reserved=step << 20))
        found.append(events.Log(t=t, step=step, values={"loss": "NaN" if step == nan_at else 3.0 - step / 100}))
        if step == 10:
            found += [events.State(t=t, state=events.PAUSED), events.State(t=t + 0.1, state=events.TRAINING)]
        if step == 20:
            found += [events.Phase(t=t, name="eval", edge="begin", step=step),
                      events.Phase(t=t, name="eval", edge="end", step=step),
                      events.Phase(t=t, name="save", edge="begin", step=step),
                      events.Checkpoint(t=t, step=step, path="c")]
    return found + [events.End(t=T0 + steps + 1, state=events.FAILED, error="CUDA out of memory")]


def _fingerprint(state: RunState) -> tuple[Any, ...]:
    """What two states must agree on to show the same panes (losses by repr, since NaN != NaN)."""
    gpu = state.gpus.get(0)
    return (state.step, state.state, repr(state.loss), state.nan_steps, state.peak_reserved, state.n_events,
            list(state.step_times), gpu and (gpu.used.xs, gpu.used.ys, list(gpu.utils), gpu.used_peak),
            state.checkpoints, state.phases, state.end)


def test_clock_at_x1_delivers_by_recorded_time() -> None:
    replay = Replay(_run())
    replay.clock.play(wall=50.0)
    assert len(replay.tick(wall=50.0)) == 3  # header, train begin, state at the start
    due = replay.tick(wall=51.0)  # one second later: step 1 and its samples
    assert [type(e).__name__ for e in due][-2:] == ["Step", "Log"] and due[-1].step == 1
    assert replay.tick(wall=51.0) == []  # nothing twice


def test_clock_at_x1000_plays_the_whole_run_in_a_tenth_of_a_second() -> None:
    replay = Replay(_run())
    replay.clock.set_speed(1000, wall=0.0)
    replay.clock.play(wall=0.0)
    delivered = replay.tick(wall=0.02) + replay.tick(wall=0.1)
    assert len(delivered) == replay.n_events and replay.done
    assert not replay.clock.playing  # it stops at the end instead of running on


def test_x1000_replay_reaches_the_same_state_as_the_live_fold() -> None:
    found = _run()
    live = RunState().feed_all(found)
    replay, shown, wall = Replay(found), RunState(), 0.0
    replay.clock.set_speed(1000, wall)
    replay.clock.play(wall)
    while not replay.done:
        wall += 1 / 30  # a 30 fps timer
        shown.feed_all(replay.tick(wall))
    assert _fingerprint(shown) == _fingerprint(live)


def test_speed_ladder_and_pause() -> None:
    clock = ReplayClock(virtual=0.0)
    for _ in range(20):
        clock.faster(wall=0.0)
    assert clock.speed == SPEEDS[-1] == 1000
    clock.slower(wall=0.0)
    assert clock.speed == 500
    clock.play(wall=10.0)
    clock.pause(wall=11.0)
    assert clock.now(wall=99.0) == 500.0  # paused: virtual time stands still
    clock.toggle(wall=100.0)
    clock.set_speed(1, wall=101.0)  # no jump when the speed changes
    assert clock.now(wall=101.0) == 1000.0 and clock.now(wall=102.0) == 1001.0


@pytest.mark.parametrize("every", [7, 64, None])
def test_state_at_any_index_equals_a_fresh_fold(every: int | None) -> None:
    found = _run()
    replay = Replay(found, snapshot_every=every)
    for index in [0, 1, 5, 100, 101, 200, len(found) - 1, len(found), 37, 3]:  # out of order on purpose
        assert _fingerprint(replay.state_at(index)) == _fingerprint(RunState().feed_all(found[:index]))


def test_seek_to_a_step_shows_that_step_and_moves_the_clock() -> None:
    replay = Replay(_run())
    state = replay.seek(replay.index_of_step(12), wall=5.0)
    assert state.step == 12 and state.loss[-1][0] == 12
    assert T0 + 12 < replay.clock.now(wall=5.0) < T0 + 13  # at the last event shown, before step 13
    after = replay.events_until(T0 + 13)
    assert [e.step for e in after if isinstance(e, events.Step)] == [13]
    assert replay.seek(replay.index_of_step(10_000), wall=5.0).end is not None  # past the end: the end
    assert replay.seek(replay.index_of_step(0), wall=5.0).step == 0


def test_seeking_back_does_not_disturb_later_seeks() -> None:
    replay = Replay(_run(), snapshot_every=16)
    late = _fingerprint(replay.seek(replay.index_of_step(35), wall=0.0))
    replay.seek(replay.index_of_step(3), wall=0.0)
    assert _fingerprint(replay.seek(replay.index_of_step(35), wall=0.0)) == late


def test_events_of_note_in_order_both_ways() -> None:
    replay = Replay(_run())
    kinds = []
    index: int | None = 0
    while (index := replay.next_note(index)) is not None:
        event = replay.read(index - 1, index)[0]
        kinds.append((type(event).__name__, getattr(event, "state", getattr(event, "name", ""))))
    assert kinds == [("State", "paused"), ("Phase", "eval"), ("Checkpoint", ""), ("Log", ""), ("End", "failed")]
    last = replay.notes[-1] + 1
    assert replay.prev_note(last) == replay.notes[-2] + 1 and replay.prev_note(replay.notes[0] + 1) is None


def test_one_save_is_one_stop() -> None:
    """A save is its phase and its checkpoint, as the trainer writes them: `]` stops once, at the checkpoint."""
    found = _run(steps=30, nan_at=0)[:-1]
    replay = Replay(found)
    saves = [i for i in replay.notes if isinstance(found[i], (events.Phase, events.Checkpoint))
             and getattr(found[i], "name", "save") == "save"]
    assert [type(found[i]).__name__ for i in saves] == ["Checkpoint"]


def test_a_finished_end_is_not_of_note() -> None:
    found = _run(steps=3, nan_at=0)[:-1] + [events.End(t=T0 + 9, state=events.FINISHED)]
    assert list(Replay(found).notes) == []


def test_extend_follows_a_log_still_being_written() -> None:
    found = _run()
    replay = Replay(found[:50])
    replay.extend(found[50:])
    assert _fingerprint(replay.state_at(len(found))) == _fingerprint(RunState().feed_all(found))
    assert replay.index_of_step(40) == len(found)


def _write(path: Path, found: list[Any], tail: bytes = b"") -> None:
    path.write_bytes(b"".join(events.encode(e) for e in found) + tail)


def test_torn_and_truncated_logs_replay_what_is_there(tmp_path: Path) -> None:
    found = _run()
    log = tmp_path / "events.jsonl"
    data = b"".join(events.encode(e) for e in found)
    log.write_bytes(data[: len(data) // 2 + 7])  # cut mid-line: a writer killed, a copy truncated
    contents = read_log(log)
    assert contents.skipped == 1 and "1 unreadable line skipped" in contents.notes()
    replay = Replay(contents.events)
    assert replay.state_at(len(contents.events)).step == max(e.step for e in contents.events
                                                              if isinstance(e, events.Step))


def test_junk_and_unknown_kinds_are_counted_and_the_rest_read(tmp_path: Path) -> None:
    found = _run()
    log = tmp_path / "events.jsonl"
    lines = [events.encode(e) for e in found]
    lines.insert(30, b'{"kind":"hologram","t":1030.0,"x":1}\n')
    lines.insert(60, b"\x00\x00garbage\n")
    log.write_bytes(b"".join(lines))
    contents = read_log(log)
    assert (contents.unknown, contents.skipped, len(contents.events)) == (1, 1, len(found))
    assert "newer schema" in contents.notes()


def test_bench_quick_runs() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "replay_open.py"), "--quick"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1].startswith("RESULT events=")


def test_a_malformed_event_is_not_called_newer(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    lines = [events.encode(e) for e in _run()]
    lines.insert(30, b'{"kind":"step","t":1030.0,"step":"eleven"}\n')  # a kind we know, fields we cannot read
    log.write_bytes(b"".join(lines))
    contents = read_log(log)
    assert (contents.malformed, contents.unknown) == (1, 0)
    assert contents.notes() == "1 malformed event skipped (a known kind with missing or wrong fields)"


def test_a_pause_shows_the_state_at_the_time_it_shows() -> None:
    """Space between two ticks froze the clock up to a tick ahead of the panes (a tick is a second of the run
    at x10, ten at x100): the bar said 1m21s over step 60 of a real tiny run, and `→` then showed step 61 at
    1m20s, the clock going back as the step went forward. The pause delivers what is due by its time."""
    replay = Replay(_run())
    replay.clock.set_speed(10, wall=0.0)
    replay.clock.play(wall=0.0)
    shown = RunState().feed_all(replay.tick(wall=0.5))  # the run at 5 s: step 5
    assert shown.step == 5
    shown.feed_all(replay.pause(wall=0.65))  # space 0.15 s later, before the next tick: the run at 6.5 s
    assert not replay.clock.playing and replay.clock.now(wall=9.0) == T0 + 6.5
    assert shown.step == 6 and _fingerprint(shown) == _fingerprint(replay.state_at(replay.cursor))
    assert replay.cursor == sum(1 for e in _run() if e.t <= T0 + 6.5)
    assert replay.pause(wall=1.0) == []  # paused already: nothing more is due
