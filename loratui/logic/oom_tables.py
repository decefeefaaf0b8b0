"""What other printouts beside an OOM say of the card: torch.cuda.memory_summary()'s rows and TensorFlow's or XLA's
BFC allocator stats (a pool with room but no block that held the request is fragmented), and nvidia-smi's process
table (other processes that hold the card). The OOM message itself is read in logic/oom.py. Pure logic."""

from __future__ import annotations

import re

from loratui.logic.oom import FRAGMENTATION, SIZE, OomReport, gib
from loratui.units import GIB, MIB

BFC_REQUEST = re.compile(r"ran out of memory trying to allocate " + SIZE, re.I)

BFC_STAT = re.compile(r"^\s*(?:\[[^\]]{0,40}\]:?\s*)?(Limit|InUse|LargestFreeBlock):\s+(\d{1,15})\s*$")
"""TensorFlow's and XLA's BFC allocator on failure: `Allocator (GPU_0_bfc) ran out of memory trying to allocate
1.17GiB`, then its chunk summary and its stats, one per line: `Limit:  15545312871`, `InUse:  14912008192`, and in
newer versions `LargestFreeBlock:  1200000000`."""

SUMMARY_ROW = re.compile(r"^\s*\|\s*(Allocated memory|GPU reserved memory|Non-releasable memory)\s*\|\s*" + SIZE)
"""A row of torch.cuda.memory_summary(): its current usage (`| Non-releasable memory |   7900 MiB | ...`)."""


def summary_cause(rows: dict[str, int]) -> tuple[str, str]:
    """(FRAGMENTATION, why) when memory_summary()'s non-releasable memory (cached blocks split and partly in use,
    which the allocator can neither use for a larger request nor give back) is a real share of what it reserved."""
    spare, reserved = rows.get("Non-releasable memory"), rows.get("GPU reserved memory")
    if spare is None or reserved is None or spare < max(GIB, reserved // 5):
        return "", ""
    return FRAGMENTATION, f"memory_summary(): {gib(spare)} non-releasable of {gib(reserved)} reserved"


def bfc_cause(stats: dict[str, int]) -> tuple[str, str]:
    """(FRAGMENTATION, why) when the allocator's pool had room for the request but no block of it did: its limit
    less what was in use held the request and a real share of the pool (or its largest free block, when printed,
    was smaller than the request); ('', '') otherwise, a full pool being what the message says already."""
    requested, limit, in_use = stats.get("requested"), stats.get("Limit"), stats.get("InUse")
    if requested is None or limit is None or in_use is None or not 0 <= in_use <= limit:
        return "", ""
    spare, largest = limit - in_use, stats.get("LargestFreeBlock")
    if spare < requested or spare < max(256 * MIB, limit // 20) or (largest is not None and largest >= requested):
        return "", ""
    return FRAGMENTATION, (f"the allocator's pool had {gib(spare)} free of its {gib(limit)} limit ({gib(in_use)} in "
                           f"use), but no block of it held the {gib(requested)} asked for")

SMI_PROCESS = re.compile(r"^\s*\|\s+(\d{1,2})\s+(?:N/A\s+N/A\s+|\d{1,3}\s+\d{1,3}\s+)?(\d{1,10})\s+(?:C|G|C\+G|M|M\+C)\s+"
                         r"\S.*?\s(\d{1,7})\s*MiB\s*\|\s*$")
"""A row of nvidia-smi's process table: `|    0   N/A  N/A     41234      C   python     9800MiB |` (drivers since
450), `|    0     41234      C   python     9800MiB |` (before)."""


def smi_row(line: str) -> tuple[int, int, int] | None:
    """(gpu, pid, bytes) of an nvidia-smi process row, or None."""
    row = SMI_PROCESS.match(line) if "MiB" in line else None
    return (int(row.group(1)), int(row.group(2)), int(row.group(3)) * MIB) if row else None


def smi_card(rows: list[tuple[int, int, int]], report: OomReport) -> tuple[int, list[tuple[int, int]]] | None:
    """(gpu, [(pid, bytes)]) of the failing card when nvidia-smi lists processes besides this one that together hold
    a GiB or more of it: another job, or the stray CUDA contexts (a few hundred MiB each) that ranks without their
    own device open on the first card; None when it shows this run alone on each card, or beside a desktop's few
    hundred MiB."""
    by_gpu: dict[int, list[tuple[int, int]]] = {}
    for gpu, pid, size in rows:
        if size >= 256 * MIB and (report.gpu is None or gpu == report.gpu):
            by_gpu.setdefault(gpu, []).append((pid, size))
    return next(((gpu, procs) for gpu, procs in by_gpu.items()
                 if len(procs) >= 2 and sum(b for _, b in smi_others(procs, report)) >= GIB), None)


def smi_others(procs: list[tuple[int, int]], report: OomReport) -> list[tuple[int, int]]:
    """The card's processes besides this one: the one whose use the message gives, else the largest."""
    mine = report.process_used or report.reserved
    own = min(procs, key=lambda p: abs(p[1] - mine)) if mine else max(procs, key=lambda p: p[1])
    return [p for p in procs if p != own]
