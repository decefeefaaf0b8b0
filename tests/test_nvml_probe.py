"""The real NVML adapter with pynvml patched: the calls it makes exist in nvidia-ml-py, and the failures
users hit (no library, a call NotSupported, a GPU lost) read as N/A instead of raising."""

from __future__ import annotations

import types
from typing import Any

import pytest

from loratui.supervisor import gpu
from loratui.supervisor.gpu import NvmlProbe, ProbeUnavailable

GIB = 1 << 30


class NVMLError(Exception):
    pass


def _fake_pynvml(**overrides: Any) -> types.ModuleType:
    mod = types.ModuleType("pynvml")
    mod.NVMLError = NVMLError  # type: ignore[attr-defined]
    mod.nvmlInit = lambda: None  # type: ignore[attr-defined]
    mod.nvmlDeviceGetCount = lambda: 1  # type: ignore[attr-defined]
    mod.nvmlDeviceGetHandleByIndex = lambda i: f"h{i}"  # type: ignore[attr-defined]
    mod.nvmlDeviceGetName = lambda h: b"NVIDIA H200"  # type: ignore[attr-defined]
    mod.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=20 * GIB, total=140 * GIB)  # type: ignore[attr-defined]
    mod.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=97)  # type: ignore[attr-defined]
    mod.nvmlDeviceGetComputeRunningProcesses = lambda h: [  # type: ignore[attr-defined]
        types.SimpleNamespace(pid=42, usedGpuMemory=19 * GIB), types.SimpleNamespace(pid=7, usedGpuMemory=None)]
    for name, value in overrides.items():
        setattr(mod, name, value)
    return mod


def _raise(*_: object) -> None:
    raise NVMLError("Not Supported")


def test_every_call_exists_in_the_real_bindings() -> None:
    real = pytest.importorskip("pynvml")
    source = open(gpu.__file__).read()
    import re

    for name in set(re.findall(r"\b(nvml[A-Za-z]+)\b", source)):
        assert hasattr(real, name), f"pynvml has no {name}"


@pytest.fixture
def patch(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    def install(**overrides: Any) -> None:
        monkeypatch.setitem(__import__("sys").modules, "pynvml", _fake_pynvml(**overrides))
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    return install


def test_healthy_h200(patch) -> None:  # type: ignore[no-untyped-def]
    patch()
    probe = NvmlProbe()
    assert probe.devices()[0].name == "NVIDIA H200" and probe.devices()[0].total == 140 * GIB
    assert probe.memory_used(0) == 20 * GIB and probe.utilisation(0) == 97
    assert probe.processes(0) == {42: 19 * GIB, 7: 0}  # hidden per-process memory reads as 0


def test_utilisation_not_supported_is_na(patch) -> None:  # type: ignore[no-untyped-def]
    patch(nvmlDeviceGetUtilizationRates=_raise, nvmlDeviceGetComputeRunningProcesses=_raise)
    probe = NvmlProbe()
    assert probe.utilisation(0) is None and probe.processes(0) is None and probe.memory_used(0) == 20 * GIB


def test_gpu_fallen_off_the_bus_is_na(patch) -> None:  # type: ignore[no-untyped-def]
    patch()
    probe = NvmlProbe()
    import sys

    sys.modules["pynvml"].nvmlDeviceGetMemoryInfo = _raise  # type: ignore[attr-defined]
    assert probe.memory_used(0) is None


def test_no_driver_is_a_reason_not_a_crash(patch) -> None:  # type: ignore[no-untyped-def]
    patch(nvmlInit=_raise)
    with pytest.raises(ProbeUnavailable, match="NVML cannot start"):
        NvmlProbe()
    probe, why = gpu.open_probe()
    assert probe is None and "NVML cannot start" in why


def test_a_binding_without_a_call_reads_na(patch) -> None:  # type: ignore[no-untyped-def]
    patch()
    import sys

    del sys.modules["pynvml"].nvmlDeviceGetComputeRunningProcesses
    assert NvmlProbe().processes(0) is None
