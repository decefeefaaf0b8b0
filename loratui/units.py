"""Byte units, one place: GiB is 2**30 bytes, the unit nvidia-smi, PyTorch and `warn_gb` use."""

from __future__ import annotations

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def to_gib(n_bytes: float) -> float:
    """Bytes as GiB."""
    return n_bytes / GIB


def gib(value: float | None, digits: int = 1) -> str:
    """Bytes as GiB text ('12.3'), or 'N/A'."""
    return "N/A" if value is None else f"{value / GIB:.{digits}f}"


def mib(value_gib: float) -> str:
    """A size given in GiB as whole MiB ('36 MiB')."""
    return f"{value_gib * 1024:.0f} MiB"


def size(value_gib: float) -> str:
    """A size given in GiB as text a person reads: '1.9 GiB', or in MiB under a GiB ('36 MiB': one decimal
    of a GiB is '0.0' for anything under 50 MiB, as a tiny CPU run's estimate is)."""
    return mib(value_gib) if value_gib < 1 else f"{value_gib:.1f} GiB"


_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600}


def seconds(text: str) -> float | None:
    """A duration as Slurm users write it ('10m', '90s', '1h', '1h30m') in seconds; None when unreadable."""
    import re

    parts = re.fullmatch(r"\s*((?:\d+(?:\.\d+)?[smh]\s*)+)\s*", text)
    if not parts:
        return None
    return float(sum(float(n) * _DURATION_UNITS[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)([smh])", text)))
