"""Byte units, one place: GiB is 2**30 bytes, the unit nvidia-smi, PyTorch and `warn_gb` use."""

from __future__ import annotations

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def to_gib(n_bytes: float) -> float:
    """Bytes as GiB."""
    return n_bytes / GIB


def gib(value: float | None, digits: int = 1) -> str:
    """Bytes as GiB text ('12.3'), or 'N/A'."""
    return "N/A" if value is None else f"{value / GIB:.{digits}f}"
