"""What a resumed trainer carries over from its run's earlier lives (a suspend and resume starts a new process)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

import msgspec

from loratui import events

BLOCK = 1 << 20
SCAN_LIMIT = 64 << 20
"""How far back from the log's end to look (the step resumed from is among the last lives' steps)."""
_STEP = b'{"kind":"step"'


def tokens_seen_at(log: Path, step: int, rank: int = 0) -> int:
    """The tokens this rank had seen by `step` in an earlier life: its last Step at or before that step, read
    from the log's end backwards; 0 where there is none (a first life, a checkpoint of another run)."""
    try:
        with open(log, "rb") as handle:
            return _scan(handle, step, rank)
    except OSError:
        return 0


def _scan(handle: BinaryIO, step: int, rank: int) -> int:
    end = pos = handle.seek(0, os.SEEK_END)
    rest = b""
    while pos > 0 and end - pos < SCAN_LIMIT:
        start = max(0, pos - BLOCK)
        handle.seek(start)
        lines = (handle.read(pos - start) + rest).split(b"\n")
        pos = start
        rest = lines.pop(0) if pos > 0 else b""  # maybe the end of a line that began in the block before
        for line in reversed(lines):
            found = _tokens(line, step, rank)
            if found is not None:
                return found
    return 0


def _tokens(line: bytes, step: int, rank: int) -> int | None:
    if not line.startswith(_STEP):
        return None
    try:
        event = msgspec.json.decode(line, type=events.Step)
    except msgspec.DecodeError:
        return None  # a torn line
    return event.tokens_seen if event.rank == rank and event.step <= step else None


__all__ = ["tokens_seen_at"]
