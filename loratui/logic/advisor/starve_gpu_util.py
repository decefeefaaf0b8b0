"""Data starvation in GPU utilisation sampled in a pasted text: nvidia-smi tables and gpustat rows, `nvidia-smi
dmon`, `--query-gpu` CSV, a monitor's keyed readings (wandb, Lightning, DCGM, rocm-smi). One snapshot can fall
between two busy steps, so a verdict wants several readings; a snapshot or two only counts at the text's end, and
only when every GPU is nearly idle. Pure: lines in, facts out, bounded state."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from loratui.logic.fmt import quoted

SMI_ROW = re.compile(r"\|\s*(\d+)MiB\s*/\s*(\d+)MiB\s*\|\s*(\d+)%\s")
GPUSTAT_ROW = re.compile(r"\d+\s*'?°?C,\s*(\d+)\s*%\s*\|\s*(\d+)\s*/\s*\d+\s*MB")
"""A row of nvidia-smi (`| 30563MiB / 81920MiB |      2%  `: memory used and total, utilisation) and of gpustat
(`[0] NVIDIA A100-SXM4-80GB | 34°C,   2 % | 30563 / 81920 MB | user(30560M)`)."""
_CSV_HEADER = re.compile(r"utilization\.gpu", re.I)
_KEYED_UTIL = re.compile(
    r"\bgpu\.\d+\.gpu\b['\"]?\s*[:=,]?\s*(\d+(?:\.\d+)?)(?![\d.]*\s*(?:MiB|GB|MB))|"  # wandb's system metrics
    r"utilization\.gpu \(%\)['\"]?\s*[:=]\s*(\d+(?:\.\d+)?)|"  # Lightning's DeviceStatsMonitor
    r"\bDCGM_FI_DEV_GPU_UTIL\{[^}]*\}\s+(\d+(?:\.\d+)?)|"  # DCGM's exporter
    r"GPU\[\d+\]\s*:\s*GPU use \(%\)\s*:\s*(\d+)|"  # rocm-smi
    r"^\s*Gpu\s*:\s*(\d+)\s*%\s*$")  # nvidia-smi -q -d UTILIZATION
"""The GPU's utilisation under its own key in a monitor's output (memory utilisation has keys of its own)."""
_NOHEADER_CSV = re.compile(r"^[^%]*?(\d{1,3})\s*%\s*,\s*(\d+)\s*MiB\b")
"""`--query-gpu=index,utilization.gpu,memory.used --format=csv,noheader`: `0, 5 %, 20000 MiB`."""
_DMON_HEADER = re.compile(r"^\s*#\s*gpu\s+.*\bsm\b", re.I)
READINGS = 4
"""Utilisation readings enough to judge a GPU's average (one snapshot can fall between two busy steps)."""
LOW_MEAN = 50
DIP = 20
DIP_SHARE = 0.25
"""Starved: busy half the time or less on average, or a quarter of the readings in a dip (the loader stalls)."""
FEW_HIGH = 30
"""A snapshot or two (a table pasted to show it): every GPU holding a model at 30% or less."""
FULL_SHARE = 0.95
"""A snapshot whose every card is all but full says memory (held by this run or others), not data: no verdict."""


@dataclass
class UtilSamples:
    """GPU utilisation readings from nvidia-smi/gpustat snapshots, `nvidia-smi dmon` and `--query-gpu` CSV."""

    readings: list[int] = field(default_factory=list)  # utilisation of GPUs holding memory (a model loaded)
    lines: list[str] = field(default_factory=list)  # the first rows read, to quote
    full: int = 0  # nvidia-smi rows whose memory is all but full
    _csv: tuple[int, int] | None = None  # (utilization column, memory.used column) of a CSV header
    _dmon: int | None = None  # the `sm` column of a dmon header

    def line(self, line: str) -> bool:
        """Fold one line in; True when it held a reading."""
        util = self._reading(line)
        if util is None or len(self.readings) >= 4096:
            return False
        self.readings.append(util)
        if len(self.lines) < 3:
            self.lines.append(quoted(line, 200))
        return True

    def _reading(self, line: str) -> int | None:
        if ("gpu" in line or "GPU" in line or "Gpu" in line) and ("%" in line or "gpu." in line or "UTIL" in line):
            keyed = _KEYED_UTIL.search(line)
            if keyed:
                value = float(next(g for g in keyed.groups() if g is not None))
                return round(value) if value <= 100 else None
        if "MiB" in line:
            noheader = _NOHEADER_CSV.match(line) if self._csv is None and "," in line else None
            if noheader and line.count("%") == 1:
                return int(noheader.group(1)) if int(noheader.group(2)) >= 1024 else None
            return self._smi(line)
        if "MB" in line and "%" in line:
            gpustat = GPUSTAT_ROW.search(line)
            if gpustat:
                return int(gpustat.group(1)) if int(gpustat.group(2)) >= 1024 else None
        return self._table_reading(line) if self._tabled(line) else None

    def _smi(self, line: str) -> int | None:
        smi = SMI_ROW.search(line)
        if smi:
            used, total = int(smi.group(1)), int(smi.group(2))
            self.full += used >= FULL_SHARE * total
            return int(smi.group(3)) if used >= 1024 else None
        return self._table_reading(line) if self._tabled(line) else None

    def _tabled(self, line: str) -> bool:
        """Whether the line may be a dmon or CSV header, or a row of one already seen."""
        return "#" in line or "utilization" in line or self._dmon is not None or self._csv is not None

    def _table_reading(self, line: str) -> int | None:
        if _DMON_HEADER.search(line):
            names = line.replace("#", " ").split()
            self._dmon = names.index("sm") if "sm" in names else None
            return None
        if _CSV_HEADER.search(line) and ("," in line or line.strip().lower().startswith("utilization.gpu")):
            cells = [c.strip().lower() for c in line.split(",")]
            util = next((i for i, c in enumerate(cells) if c.startswith("utilization.gpu")), None)
            used = next((i for i, c in enumerate(cells) if c.startswith("memory.used")), -1)
            self._csv = (util, used) if util is not None else None
            return None
        if self._dmon is not None and not line.lstrip().startswith("#"):
            cells = line.split()
            if len(cells) > self._dmon and cells[0].isdigit() and cells[self._dmon].isdigit():
                return int(cells[self._dmon])
        if self._csv is not None and ("," in line or self._csv[1] < 0):
            return self._csv_reading(line)
        return None

    def _csv_reading(self, line: str) -> int | None:
        assert self._csv is not None
        cells = [c.strip() for c in line.split(",")]
        util, used = self._csv
        if len(cells) <= max(util, used):
            return None
        number = re.match(r"(\d{1,3})\s*%?$", cells[util])
        memory = re.match(r"(\d+)\s*(?:MiB)?$", cells[used]) if used >= 0 else None
        if number is None or used >= 0 and (memory is None or int(memory.group(1)) < 1024):
            return None
        return int(number.group(1))

    def verdict(self) -> dict[str, object] | None:
        """Facts when the readings say the GPU waits: low on average, or often in a dip."""
        n = len(self.readings)
        if n < READINGS:
            return None
        return self._judged()

    def few(self) -> dict[str, object] | None:
        """At the text's end, one to three readings (a pasted nvidia-smi table): every GPU at most 30% busy."""
        if not 0 < len(self.readings) < READINGS or max(self.readings) > FEW_HIGH or self.full >= len(self.readings):
            return None
        return self._judged()

    def _judged(self) -> dict[str, object] | None:
        n = len(self.readings)
        mean = sum(self.readings) / n
        dips = sum(1 for u in self.readings if u <= DIP)
        if mean > LOW_MEAN and dips < DIP_SHARE * n:
            return None
        return {"text": "util_samples", "n": n, "mean": mean, "low": min(self.readings),
                "high": max(self.readings), "dips": dips, "line": " / ".join(self.lines)}
