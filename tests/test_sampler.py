"""The peak-preserving sampler, with a scripted probe and the real pacing loop."""

from __future__ import annotations

import time

from loratui import events
from loratui.logic.series import PeakSeries, bucket_max
from loratui.supervisor.sampler import Sampler
from tests.conftest import wait_for
from tests.fakes import GIB, ScriptedProbe, spike_at, steady


def _run(probe: ScriptedProbe, seconds: float, sample_hz: float = 100, record_hz: float = 10,
         paced: bool = False) -> list[events.AnyEvent]:
    """Sample `probe` for `seconds` of real time; `paced`: on a clock that moves one sampling period per
    read, so windows hold exactly sample_hz / record_hz reads however the machine schedules the thread."""
    seen: list[events.AnyEvent] = []
    clock = (lambda: probe.reads / sample_hz) if paced else time.monotonic
    sampler = Sampler(probe, seen.append, sample_hz=sample_hz, record_hz=record_hz, run_pids=lambda: [42],
                      clock=clock)
    sampler.start()
    time.sleep(seconds)
    sampler.stop()
    return seen


def test_one_reading_spike_is_in_the_window_max() -> None:
    probe = ScriptedProbe(spike_at(10, 14, tick=37), procs={42: 9 * GIB, 7: 1 * GIB})
    samples = [e for e in _run(probe, 1.0, paced=True) if isinstance(e, events.Sample)]
    assert max(s.used_max for s in samples) == 14 * GIB
    assert all(s.used_last == 10 * GIB for s in samples)  # a point sample would have missed it
    assert samples[0].run_pids == [42] and samples[0].procs == {"42": 9 * GIB, "7": 1 * GIB}


def test_record_rate_matches_record_hz() -> None:
    # On the paced clock the windowing does not depend on the box's load: 10 reads of 100 Hz a 100 ms window
    # (one more or less where the float window edges fall between two reads).
    samples = [e for e in _run(ScriptedProbe(steady(5)), 1.0, sample_hz=100, record_hz=10, paced=True)
               if isinstance(e, events.Sample)]
    whole = [s.n for s in samples[:-1]]  # the last window is cut by stop()
    assert len(whole) >= 2 and all(9 <= n <= 11 for n in whole) and abs(sum(whole) / len(whole) - 10) < 0.5, whole
    # On the real clock: the sampler never reads faster than asked (a loaded box may make it slower, which is
    # what the stats are for) and takes a small share of a core.
    seen = _run(ScriptedProbe(steady(5)), 2.0, sample_hz=100, record_hz=10)
    stats = [e for e in seen if isinstance(e, events.SamplerStats)][-1]
    assert 0 < stats.achieved_hz <= 105 and stats.cpu_share < 0.5


def test_unreadable_memory_makes_no_sample() -> None:
    seen = _run(ScriptedProbe(lambda tick: None), 0.4)
    assert not [e for e in seen if isinstance(e, events.Sample)]


def test_display_downsampling_keeps_the_spike() -> None:
    series = PeakSeries(capacity=64)
    for i in range(10_000):
        series.add(float(i), 20.0 if i == 7777 else 10.0)
    assert len(series) <= 65 and max(series.ys) == 20.0
    assert max(bucket_max([10.0] * 999 + [30.0] + [10.0] * 1000, 50)) == 30.0


def test_slow_nvml_lowers_the_rate_and_says_so() -> None:
    class SlowProbe(ScriptedProbe):
        def memory_used(self, index: int) -> int | None:
            time.sleep(0.004)  # 4 ms a read: 40% of a 10 ms period
            return super().memory_used(index)

    seen: list[events.AnyEvent] = []
    sampler = Sampler(SlowProbe(steady(5)), seen.append, sample_hz=100, record_hz=10, stats_every=0.5)
    sampler.start()
    try:  # until the stats say so: a loaded box takes longer to gather the reads they judge
        notes = wait_for(lambda: [e.note for e in list(seen) if isinstance(e, events.SamplerStats) and e.note])
    finally:
        sampler.stop()
    assert "sampling lowered to 50 Hz" in notes[0]  # type: ignore[index]


def test_phase_columns_are_marked() -> None:
    from loratui.logic.chart import column_spans, intervals, marked_columns

    xs = [float(t) for t in range(100)]
    spans = column_spans(xs, 10)
    marks = intervals([(40.5, "save", "begin", 3), (42.0, "save", "end", 3), (90.0, "eval", "begin", 9)],
                      frozenset({"eval", "save"}), until=99.0)
    assert marks == [(40.5, 42.0), (90.0, 99.0)]
    assert marked_columns(spans, marks) == [False] * 4 + [True] + [False] * 4 + [True]


def test_a_probe_that_raises_is_recorded_not_silent() -> None:
    class Broken(ScriptedProbe):
        def processes(self, index: int) -> dict[int, int] | None:
            raise AttributeError("module 'pynvml' has no attribute 'nvmlDeviceGetComputeProcesses'")

    seen = _run(Broken(steady(5)), 0.5)
    notices = [e for e in seen if isinstance(e, events.Notice)]
    assert notices and "GPU sampling stopped" in notices[0].message and notices[0].level == "error"
