"""GPU probes: the NVML adapter and the protocol the sampler uses (tests pass a fake).

A reading NVML cannot give is `None`, never an exception into the caller: a card that does not report
utilisation, a process list that is not supported, or a GPU that fell off the bus all show as N/A.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Device:
    """One GPU as the probe sees it."""

    index: int
    name: str
    total: int  # bytes


class GpuProbe(Protocol):
    """What the sampler needs from a GPU backend."""

    def devices(self) -> list[Device]:
        """The GPUs to watch."""

    def memory_used(self, index: int) -> int | None:
        """Device memory used in bytes (NVML's v1 'used'), or None."""

    def utilisation(self, index: int) -> int | None:
        """GPU utilisation in percent over the driver's last sample period, or None."""

    def processes(self, index: int) -> dict[int, int] | None:
        """pid -> bytes of every compute process on the GPU, or None."""


class ProbeUnavailable(Exception):
    """No GPU can be read: the message says why (no NVML library, no driver, no device)."""


class NvmlProbe:
    """The real probe, through nvidia-ml-py (`import pynvml`)."""

    def __init__(self, visible: list[int] | None = None) -> None:
        try:
            import pynvml
        except ImportError:
            raise ProbeUnavailable("nvidia-ml-py is not installed (pip install 'loratui[gpu]')") from None
        self._nvml: Any = pynvml
        try:
            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
        except pynvml.NVMLError as exc:
            raise ProbeUnavailable(f"NVML cannot start: {exc}") from None
        if count == 0:
            raise ProbeUnavailable("NVML sees no GPU")
        indices = visible if visible is not None else _visible_indices(count)
        self._handles = {i: pynvml.nvmlDeviceGetHandleByIndex(i) for i in indices if i < count}
        self._devices = [self._describe(i, h) for i, h in self._handles.items()]

    def _describe(self, index: int, handle: Any) -> Device:
        name = self._call("nvmlDeviceGetName", handle)
        info = self._call("nvmlDeviceGetMemoryInfo", handle)
        name = name.decode() if isinstance(name, bytes) else str(name or f"GPU {index}")
        return Device(index=index, name=name, total=int(info.total) if info is not None else 0)

    def _call(self, name: str, *args: Any) -> Any:
        """`pynvml.<name>(*args)`, or None when NVML cannot answer (or this binding lacks the call)."""
        fn = getattr(self._nvml, name, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except self._nvml.NVMLError:
            return None

    def devices(self) -> list[Device]:
        return list(self._devices)

    def memory_used(self, index: int) -> int | None:
        info = self._call("nvmlDeviceGetMemoryInfo", self._handles[index])
        return int(info.used) if info is not None else None

    def utilisation(self, index: int) -> int | None:
        rates = self._call("nvmlDeviceGetUtilizationRates", self._handles[index])
        return int(rates.gpu) if rates is not None else None

    def processes(self, index: int) -> dict[int, int] | None:
        procs = self._call("nvmlDeviceGetComputeRunningProcesses", self._handles[index])
        if procs is None:
            return None
        # usedGpuMemory is None where the driver hides it (some containers, MIG).
        return {int(p.pid): int(p.usedGpuMemory or 0) for p in procs}


def _visible_indices(count: int) -> list[int]:
    """NVML indices named by CUDA_VISIBLE_DEVICES when it holds plain integers, else all GPUs."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return list(range(count))
    try:
        return [int(part) for part in visible.split(",") if part.strip()]
    except ValueError:  # UUIDs: watch every GPU rather than guess
        return list(range(count))


def open_probe() -> tuple[GpuProbe | None, str]:
    """The NVML probe, or None with the reason there is none."""
    try:
        return NvmlProbe(), ""
    except ProbeUnavailable as exc:
        return None, str(exc)
