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
    # 2 GiB outside PyTorch, but 7.62 GiB asked with 4.64 GiB free: with the card to itself it would not have fit
    ("RuntimeError: CUDA out of memory. Tried to allocate 7.62 GiB (GPU 0; 12.00 GiB total capacity; 5.33 GiB "
     "already allocated; 4.64 GiB free; 5.35 GiB reserved in total by PyTorch)", oom.FULL),
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
    "we check for out of memory conditions below",
    "x" * 100000,
])
def test_not_a_cuda_oom(line: str) -> None:
    # an MPS or XPU OOM is a device's OOM now (tests/test_oom_devices.py); the CPU allocator's is the host's RAM
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


# -- formats of every era (issue 18) ----------------------------------------------------------------------

def test_pytorch_1_0_cached_is_the_unused_cache() -> None:
    """Before 1.4 "N cached" below the allocated figure is the cache's unused part, not all of it."""
    report = oom.parse_oom("RuntimeError: CUDA out of memory. Tried to allocate 338.00 MiB (GPU 0; 3.95 GiB total "
                           "capacity; 1.62 GiB already allocated; 23.00 MiB free; 9.10 MiB cached)")
    assert report is not None and report.reserved_unallocated == int(9.10 * MIB)
    assert report.kind == oom.OTHER_PROCESS  # 2.3 GiB of a 3.95 GiB card is held outside PyTorch


@pytest.mark.parametrize("line, kind", [
    # 2.4 GiB outside PyTorch on an 8 GiB card: this process's own context before lazy loading, as often as not
    ("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.80 GiB total capacity; 5.35 GiB already "
     "allocated; 20.00 MiB free; 5.38 GiB reserved in total by PyTorch)", oom.FULL),
    # 3.5 GiB outside it: more than any context held
    ("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 10.76 GiB total capacity; 7.19 GiB "
     "already allocated; 20.00 MiB free; 7.22 GiB reserved in total by PyTorch)", oom.OTHER_PROCESS),
])
def test_the_old_format_leaves_this_process_context_out(line: str, kind: str) -> None:
    """R18: the message before PyTorch counted this process's own use leaves its CUDA context out (1-3 GiB before lazy
    module loading): below 3 GiB, and short of half the card, memory outside PyTorch is not read as a neighbour's."""
    report = oom.parse_oom(line)
    assert report is not None and report.process_used is None and report.kind == kind


def test_memory_fraction_allowed_is_the_cap_not_a_neighbour() -> None:
    line = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "79.15 GiB of which 60.00 GiB is free. Including non-PyTorch memory, this process has 19.00 GiB memory "
            "in use. 20.00 GiB allowed; Of the allocated memory 18.50 GiB is allocated by PyTorch, and 100.00 MiB "
            "is reserved by PyTorch but unallocated.")
    report = oom.parse_oom(line)
    assert report is not None and report.allowed == 20 * GIB and report.kind == oom.FULL


def test_torch_2_1_capacty_typo() -> None:
    report = oom.parse_oom("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.70 GiB. GPU 0 has a "
                           "total capacty of 6.00 GiB of which 0 bytes is free. Of the allocated memory 2.93 GiB is "
                           "allocated by PyTorch, and 2.30 GiB is reserved by PyTorch but unallocated.")
    assert report is not None and report.total == 6 * GIB and report.kind == oom.FRAGMENTATION


@pytest.mark.parametrize(("requested", "total", "free", "allocated", "spare", "kind"), [
    # the cache nearly held the request, and with the free memory it would have fit
    ("1.96 GiB", "79.18 GiB", "1.08 GiB", "75.31 GiB", "1.83 GiB", oom.FRAGMENTATION),
    # the cache holds well under the request: the card is full
    ("1.95 GiB", "79.10 GiB", "1.04 GiB", "75.88 GiB", "1.23 GiB", oom.FULL),
    # as much unused in the cache as allocated
    ("22.78 GiB", "31.47 GiB", "12.73 GiB", "9.08 GiB", "9.35 GiB", oom.FRAGMENTATION),
    # a small unused cache on a full card
    ("68.00 MiB", "23.99 GiB", "0 bytes", "22.07 GiB", "0.92 GiB", oom.FULL),
])
def test_fragmentation_by_the_request(requested: str, total: str, free: str, allocated: str, spare: str,
                                      kind: str) -> None:
    line = (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {requested}. GPU 0 has a total capacity "
            f"of {total} of which {free} is free. Of the allocated memory {allocated} is allocated by PyTorch, and "
            f"{spare} is reserved by PyTorch but unallocated.")
    report = oom.parse_oom(line)
    assert report is not None and report.kind == kind


def test_small_sizes_read_in_mib_as_pytorch_prints_them() -> None:
    """A tmux trial: "tried to allocate 0.02 GiB" and "0.00 GiB free" for PyTorch's 20.00 MiB and 3.44 MiB."""
    assert oom.gib(20 * MIB) == "20.00 MiB" and oom.gib(int(3.44 * MIB)) == "3.44 MiB"
    assert oom.gib(int(1.5 * GIB)) == "1.50 GiB" and oom.gib(None) == "?"


def test_others_listed_on_the_card_are_not_blamed_where_the_request_fits_nowhere() -> None:
    # 2 GiB held by another process (NVML's list), 4.64 GiB free: a 7.62 GiB request fails with the card to itself too
    big = oom.parse_oom("RuntimeError: CUDA out of memory. Tried to allocate 7.62 GiB (GPU 0; 12.00 GiB total "
                        "capacity; 5.33 GiB already allocated; 4.64 GiB free; 5.35 GiB reserved in total by PyTorch)")
    assert big is not None and not oom.others_to_blame(big, [(4242, 2 * oom.GIB)])
    # the same card asked for 5 GiB: the neighbour's 2 GiB would have served it
    small = oom.parse_oom("RuntimeError: CUDA out of memory. Tried to allocate 5.00 GiB (GPU 0; 12.00 GiB total "
                          "capacity; 5.33 GiB already allocated; 4.64 GiB free; 5.35 GiB reserved in total by PyTorch)")
    assert small is not None and oom.others_to_blame(small, [(4242, 2 * oom.GIB)])
