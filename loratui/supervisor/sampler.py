"""The peak-preserving GPU sampler: reads memory fast, records each window's max/last/min.

Device memory is read at `sample_hz` (100 by default: a 10 ms spike is caught), utilisation and the
process list once per record window (`record_hz`, 10 by default), and one `Sample` per GPU per window
goes to the log. Pacing uses a monotonic deadline that advances by whole periods, so the rate does not
drift; if NVML calls become slow the sampler halves its rate and says so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from loratui import events
from loratui.supervisor.gpu import GpuProbe


@dataclass
class Window:
    """Readings of one GPU within one record window."""

    used_max: int = -1
    used_min: int = -1
    used_last: int = -1
    n: int = 0

    def add(self, used: int) -> None:
        """Fold one reading in."""
        self.used_max = max(self.used_max, used)
        self.used_min = used if self.n == 0 else min(self.used_min, used)
        self.used_last = used
        self.n += 1


@dataclass
class Sampler:
    """Samples every device of `probe` and emits `Sample` events through `emit`."""

    probe: GpuProbe
    emit: Callable[[events.AnyEvent], None]
    sample_hz: float = 100.0
    record_hz: float = 10.0
    run_pids: Callable[[], list[int]] = list
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    stats_every: float = 30.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Run in a daemon thread."""
        self._thread = threading.Thread(target=self.run, name="gpu-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop and wait for the thread (it emits its final stats)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def run(self) -> None:
        """The sampling loop; an unexpected probe error is recorded once and ends sampling, not the run."""
        try:
            self._loop()
        except Exception as exc:  # a sampler that dies silently would leave the VRAM pane empty
            self.emit(events.Notice(t=self.wall(), level="error", key="monitor",
                                    message=f"GPU sampling stopped: {type(exc).__name__}: {exc}"))

    def _loop(self) -> None:
        """Read, fold into windows, record, pace."""
        devices = self.probe.devices()
        period = 1.0 / self.sample_hz
        window_len = 1.0 / self.record_hz
        windows = {d.index: Window() for d in devices}
        totals = {d.index: d.total for d in devices}
        start = self.clock()
        cpu_start = time.thread_time()
        next_tick = start
        window_end = start + window_len
        next_stats = start + self.stats_every
        reads = 0
        call_time = 0.0
        while not self._stop.is_set():
            before = self.clock()
            for index, window in windows.items():
                used = self.probe.memory_used(index)
                if used is not None:
                    window.add(used)
            reads += 1
            now = self.clock()
            call_time += now - before
            if now >= window_end:
                self._record(windows, totals)
                windows = {i: Window() for i in windows}
                window_end += window_len * max(1, int((now - window_end) / window_len) + 1)
            if now >= next_stats:
                period = self._report(start, now, reads, cpu_start, call_time, period, window_len)
                next_stats = now + self.stats_every
            next_tick += period
            if next_tick < now:  # fell behind (a stalled machine): skip, never burst to catch up
                next_tick = now + period
            self._stop.wait(max(0.0, next_tick - self.clock()))
        self._record(windows, totals)
        self._report(start, self.clock(), reads, cpu_start, call_time, period, window_len)

    def _record(self, windows: dict[int, Window], totals: dict[int, int]) -> None:
        pids = self.run_pids()
        for index, window in windows.items():
            if window.n == 0:
                continue
            procs = self.probe.processes(index) or {}
            self.emit(events.Sample(
                t=self.wall(), gpu=index, used_max=window.used_max, used_last=window.used_last,
                used_min=window.used_min, total=totals[index], util=self.probe.utilisation(index),
                n=window.n, procs={str(pid): used for pid, used in procs.items()},
                run_pids=[pid for pid in pids if pid in procs] if procs else [],
            ))

    def _report(self, start: float, now: float, reads: int, cpu_start: float, call_time: float,
                period: float, window_len: float) -> float:
        """Emit achieved rate and CPU share; return the (possibly lowered) sampling period."""
        elapsed = max(now - start, 1e-9)
        note = ""
        mean_call = call_time / max(reads, 1)
        # Slow NVML (a busy driver): back off so the sampler never takes a core from training.
        if mean_call > 0.2 * period and period < window_len:
            period = min(period * 2, window_len)
            note = f"NVML calls take {mean_call * 1e3:.2f} ms; sampling lowered to {1 / period:.0f} Hz"
        self.emit(events.SamplerStats(
            t=self.wall(), target_hz=self.sample_hz, achieved_hz=reads / elapsed,
            cpu_share=(time.thread_time() - cpu_start) / elapsed, note=note,
        ))
        return period
