"""CUDA OOM messages of both PyTorch formats, from several cards, parse into the right numbers and cause."""

from __future__ import annotations

from pathlib import Path

import pytest

from loratui.logic import oom
from loratui.logic.oom import GIB, MIB

LOGS = Path(__file__).parent / "data" / "logs"


def _report(name: str) -> oom.OomReport:
    """The first OOM report in a fixture log."""
    for line in (LOGS / name).read_text(encoding="utf-8").splitlines():
        report = oom.parse_oom(line)
        if report is not None:
            return report
    raise AssertionError(f"no OOM in {name}")


@pytest.mark.parametrize(("name", "kind", "gpu", "total_gib", "requested_mib"), [
    ("oom_old_rtx3090_24gb.txt", oom.FULL, 0, 23.69, 172.0),
    ("oom_old_v100_32gb_seed.txt", oom.FULL, 0, 31.75, 512.0),
    ("oom_new_rtx5090_32gb_full.txt", oom.FULL, 0, 31.36, 2.32 * 1024),
    ("oom_new_a100_40gb_other_process.txt", oom.OTHER_PROCESS, 0, 39.38, 1.16 * 1024),
    ("oom_new_h100_80gb_fragmentation.txt", oom.FRAGMENTATION, 0, 79.10, 4.64 * 1024),
    ("oom_eval_a100_40gb.txt", oom.FULL, 0, 39.38, 9.27 * 1024),
    ("oom_multirank_h100.txt", oom.FULL, 1, 79.10, 1.95 * 1024),
])
def test_fixture_logs(name: str, kind: str, gpu: int, total_gib: float, requested_mib: float) -> None:
    report = _report(name)
    assert report.kind == kind
    assert report.gpu == gpu
    assert report.total == pytest.approx(total_gib * GIB, rel=1e-6)
    assert report.requested == pytest.approx(requested_mib * MIB, rel=1e-6)


OLD_24 = ("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 23.65 GiB total capacity; "
          "22.41 GiB already allocated; 7.06 MiB free; 22.70 GiB reserved in total by PyTorch)")
NEW_80 = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.17 GiB. GPU 1 has a total capacity "
          "of 79.15 GiB of which 1.05 GiB is free. Process 4242 has 78.08 GiB memory in use. Including non-PyTorch "
          "memory, this process has 78.08 GiB memory in use. Of the allocated memory 70.21 GiB is allocated by "
          "PyTorch, and 6.95 GiB is reserved by PyTorch but unallocated.")


@pytest.mark.parametrize(("line", "field", "expected"), [
    (OLD_24, "allocated", int(22.41 * GIB)),
    (OLD_24, "reserved", int(22.70 * GIB)),
    (OLD_24, "free", int(7.06 * MIB)),
    (OLD_24, "reserved_unallocated", int(22.70 * GIB) - int(22.41 * GIB)),
    (NEW_80, "process_used", int(78.08 * GIB)),
    (NEW_80, "reserved_unallocated", int(6.95 * GIB)),
    (NEW_80, "reserved", int(70.21 * GIB) + int(6.95 * GIB)),
    (NEW_80, "rank", None),
    ("[rank3]: " + NEW_80, "rank", 3),
    (NEW_80, "processes", ((4242, int(78.08 * GIB)),)),
    ("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 10.92 GiB total capacity; "
     "9.67 GiB already allocated; 16.56 MiB free; 9.93 GiB cached)", "reserved", int(9.93 * GIB)),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512 bytes. GPU 0 has a total capacity of "
     "23.69 GiB of which 0 bytes is free.", "requested", 512),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 640.00 KiB. GPU 0 has a total capacity of "
     "23.69 GiB of which 0 bytes is free.", "requested", 640 * 1024),
])
def test_fields(line: str, field: str, expected: object) -> None:
    report = oom.parse_oom(line)
    assert report is not None
    assert getattr(report, field) == expected


@pytest.mark.parametrize(("line", "kind"), [
    (OLD_24, oom.FULL),
    (NEW_80, oom.FRAGMENTATION),
    ("RuntimeError: CUDA error: out of memory", oom.UNKNOWN),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", oom.UNKNOWN),
    ("torch.cuda.OutOfMemoryError: CUDA out of memory.", oom.UNKNOWN),
    # old format, 16 GiB of a 40 GiB A100 held outside this process's allocator
    ("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 39.39 GiB total capacity; "
     "21.10 GiB already allocated; 1.20 GiB free; 21.90 GiB reserved in total by PyTorch)", oom.OTHER_PROCESS),
])
def test_kinds(line: str, kind: str) -> None:
    report = oom.parse_oom(line)
    assert report is not None and report.kind == kind


@pytest.mark.parametrize("line", [
    "Tried to allocate 99999999999999.00 GiB (GPU 0; 23.65 GiB total capacity; 1.00 GiB already allocated)",
    "CUDA out of memory. Tried to allocate 1.00 GiB (GPU 0; 999999999999999.00 GiB total capacity; 1.00 GiB "
    "already allocated; 1.00 GiB free; 2.00 GiB reserved in total by PyTorch)",
    OLD_24.replace("22.41 GiB already", "95.12 GiB already"),  # allocated beyond the card
    OLD_24.replace("22.41 GiB already", "23.00 GiB already").replace("22.70 GiB reserved", "2.00 GiB reserved"),
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of "
    "0.00 GiB of which 0 bytes is free. Including non-PyTorch memory, this process has 0 bytes memory in use.",
    NEW_80.replace("of which 1.05 GiB is free", "of which 30.00 GiB is free"),
])
def test_junk_numbers_give_unknown_not_a_wrong_cause(line: str) -> None:
    report = oom.parse_oom(line)
    assert report is not None
    assert report.kind == oom.UNKNOWN
    assert report.total is None and report.allocated is None


@pytest.mark.parametrize("line", [
    "",
    "{'loss': '1.2', 'grad_norm': '0.5'}",
    "RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 123 bytes. Error code 12 "
    "(Cannot allocate memory) out of memory",
    "RuntimeError: MPS backend out of memory (MPS allocated: 17.00 GB, other allocations: 1.2 GB)",
    "we check for out of memory conditions below",
    "x" * 100000,
])
def test_not_a_cuda_oom(line: str) -> None:
    assert oom.parse_oom(line) is None


@pytest.mark.parametrize(("number", "unit", "expected"), [
    ("512", "bytes", 512), ("1", "B", 1), ("1.5", "KiB", 1536), ("2.00", "MiB", 2 * MIB),
    ("1.00", "GiB", GIB), ("1", "TiB", 1 << 40), ("1", "GB", 10**9), ("1", "parsecs", None),
    ("99999999", "TiB", None),
])
def test_parse_size(number: str, unit: str, expected: int | None) -> None:
    assert oom.parse_size(number, unit) == expected


def test_other_pids_leave_out_this_process() -> None:
    report = _report("oom_new_a100_40gb_other_process.txt")
    assert [pid for pid, _ in report.other_pids] == [2918771]
