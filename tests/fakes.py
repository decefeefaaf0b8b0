"""Fakes that replace hardware: a scripted GPU probe."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from loratui.supervisor.gpu import Device

GIB = 1 << 30


@dataclass
class ScriptedProbe:
    """A GPU whose memory reading is a function of the read count (one 'tick' per memory read)."""

    used_at: Callable[[int], int | None]
    total: int = 32 * GIB
    util_at: Callable[[int], int | None] = lambda tick: 95
    procs: dict[int, int] = field(default_factory=dict)
    reads: int = 0

    def devices(self) -> list[Device]:
        return [Device(0, "Fake H200", self.total)]

    def memory_used(self, index: int) -> int | None:
        value = self.used_at(self.reads)
        self.reads += 1
        return value

    def utilisation(self, index: int) -> int | None:
        return self.util_at(self.reads)

    def processes(self, index: int) -> dict[int, int] | None:
        return dict(self.procs)


def steady(gib: float) -> Callable[[int], int]:
    return lambda tick: int(gib * GIB)


def spike_at(base_gib: float, spike_gib: float, tick: int) -> Callable[[int], int]:
    """Flat at `base_gib` with a single one-reading spike at read number `tick`."""
    return lambda t: int((spike_gib if t == tick else base_gib) * GIB)
