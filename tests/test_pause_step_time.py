"""A watched command paused by SIGSTOP: the held time is no step time (tqdm's smoothed rate carries it after a
resume for a dozen steps, which inflated the ETA: 3.26 s, 2.43 s, 1.85 s shown for 0.5 s steps)."""

from __future__ import annotations

import pytest
import tqdm.std

from loratui import events
from loratui.logic.runstate import RunState
from loratui.supervisor.watch_output import OutputWatcher


class _Clock:
    """One clock for the tqdm loop and the watcher: the loop's time is the test's to move."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Screen:
    """Where the bar draws: the watcher reads the latest redraw, as the supervisor's tail of the output does."""

    def __init__(self) -> None:
        self.drawn = ""

    def write(self, text: str) -> None:
        self.drawn += text

    def flush(self) -> None:
        pass

    def latest(self) -> str:
        return self.drawn.rsplit("\r", 1)[-1]


def _loop(monkeypatch: pytest.MonkeyPatch, pause_s: float, step_s: float = 0.5, total: int = 40,
          before: int = 10) -> tuple[list[events.Step], list[float]]:
    """A real tqdm loop of `total` steps, held `pause_s` after `before` of them (the Steps read, and the rates
    tqdm drew after the resume)."""
    clock, screen = _Clock(), _Screen()
    monkeypatch.setattr(tqdm.std, "time", clock)
    watcher = OutputWatcher(clock=clock)
    bar = tqdm.std.tqdm(range(total), desc="train", file=screen, mininterval=0, ascii=True)
    found: list[events.AnyEvent] = []
    drawn: list[float] = []
    for i, _ in enumerate(bar):
        if i == before:
            watcher.hold()
            clock.now += pause_s
            watcher.release()
        clock.now += step_s
        if i >= before:
            drawn.append(_rate(screen.latest()))
        found += watcher.feed(screen.latest())
    return [e for e in found if isinstance(e, events.Step)], drawn


def _rate(line: str) -> float:
    """Seconds per step as tqdm drew it (`2.00it/s` or `3.26s/it`)."""
    value = line.split(", ")[-1].rstrip("]")
    return float(value[:-4]) if value.endswith("s/it") else 1 / float(value[:-4])


def test_the_steps_after_a_resume_take_their_own_time(monkeypatch: pytest.MonkeyPatch) -> None:
    steps, drawn = _loop(monkeypatch, pause_s=20.0)
    assert max(drawn[1:5]) > 1.5  # tqdm's smoothing carries the pause: the defect's shape
    after = [s for s in steps if s.step > 10]
    assert [s.step_time for s in after] == [pytest.approx(0.5, rel=0.1)] * len(after) and len(after) == 29
    assert [s.step_time for s in after[:10]] == [pytest.approx(0.5)] * 10  # measured while tqdm's rate carries it
    state = RunState().feed_all([events.TrainBegin(t=0.0, max_steps=40, num_epochs=1.0), *steps[:16]])
    assert state.eta_s == pytest.approx(24 * 0.5, rel=0.1)  # not inflated by the held 20 s


def test_a_loop_without_a_rate_leaves_the_held_time_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """`step N loss X` lines, no bar: the time between readings, less the time held."""
    clock = _Clock()
    watcher = OutputWatcher(clock=clock)
    found = []
    for step in range(1, 7):
        if step == 4:
            watcher.hold()
            clock.now += 30.0
            watcher.release()
        clock.now += 2.0
        found += watcher.feed(f"step {step} loss={3.0 - step / 10}")
    times = [e.step_time for e in found if isinstance(e, events.Step)]
    assert len(times) == 5 and times[1:] == [2.0] * 4  # the first has no reading before it


def test_a_step_read_while_held_leaves_the_rest_of_the_hold_to_the_next() -> None:
    """Output printed just before the SIGSTOP is read while the hold lasts (the tail reads every 0.25 s)."""
    clock = _Clock()
    watcher = OutputWatcher(clock=clock)
    found = []
    for step in range(1, 4):
        clock.now += 2.0
        found += watcher.feed(f"step {step} loss=1.0")
    clock.now += 1.0
    watcher.hold()
    clock.now += 0.5
    found += watcher.feed("step 4 loss=1.0")  # releases step 3's loss: a step read 0.5 s into the hold
    clock.now += 20.0
    watcher.release()
    for step in range(5, 8):
        clock.now += 2.0
        found += watcher.feed(f"step {step} loss=1.0")
    times = [e.step_time for e in found if isinstance(e, events.Step)]
    assert times == [0.0, 2.0, 1.0, 2.0, 2.0, 2.0], times
