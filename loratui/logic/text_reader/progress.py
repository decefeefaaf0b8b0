"""tqdm progress bars (HF Trainer, Lightning, accelerate): position, total, rate, and a loss in the postfix."""

from __future__ import annotations

import re
from dataclasses import dataclass

_BAR = re.compile(
    r"(?P<desc>[^|\r\n]{0,200}?)\s*(?:\d{1,3}%\s*)?\|[^|\n]{0,400}\|\s*(?P<n>\d{1,12})/(?P<total>\d{1,12})\s*"
    r"\[(?P<inside>[^\]]{0,400})\]")
_RATE = re.compile(r"(\d+(?:\.\d+)?)\s*(it/s|s/it)")
_NOT_TRAINING = re.compile(
    r"load|map|token|filter|download|fetch|shard|eval|predict|valid|test|sanity|generat|convert|sav|pack|"
    r"resolv|upload|processing|example|dataset|truncat", re.I)
"""Descriptions of bars that are not the training loop (TRL's `Tokenizing train dataset` among them)."""


@dataclass(frozen=True)
class Bar:
    """One drawn state of a progress bar."""

    desc: str
    n: int
    total: int
    seconds_per_it: float | None
    """From `12.3s/it` or `4.56it/s`; None when the bar has no rate yet."""
    end: int
    """Where the bar ends in the fragment (a dict may be glued after it)."""
    tail: str
    """The postfix inside the brackets after the rate (`loss=10.473, v_num=193315`)."""

    @property
    def maybe_training(self) -> bool:
        """No description, or one that names no other phase (`Epoch 0`, `Training`)."""
        return not _NOT_TRAINING.search(self.desc)


def find_bar(fragment: str) -> Bar | None:
    """The last progress bar drawn in a fragment, or None."""
    if "|" not in fragment or "/" not in fragment or len(fragment) > 4000:
        return None
    last = None
    for last in _BAR.finditer(fragment):
        pass
    if last is None:
        return None
    inside = last.group("inside")
    rate = _RATE.search(inside)
    per_it = None
    if rate:
        value = float(rate.group(1))
        per_it = value if rate.group(2) == "s/it" else (1.0 / value if value > 0 else None)
    tail = inside[rate.end():] if rate else ""
    return Bar(desc=last.group("desc").strip(), n=int(last.group("n")), total=int(last.group("total")),
               seconds_per_it=per_it, end=last.end(), tail=tail)


def trains(line: str) -> bool:
    """Whether a line reads as training going on (a loss, a training bar): after slurmstepd's line of a job's end,
    the job was requeued and its next start appends to the same .out. (A train dict is read when its bar comes,
    so a reader's events are too late to tell.)"""
    if "loss" in line.lower():
        return True
    bar = find_bar(line)
    return bar is not None and bar.maybe_training


def job_end_so_far(ended: tuple[str, str] | None, line: str) -> tuple[str, str] | None:
    """slurmstepd's end of a job (`slurm.said_end`: its cause and job id) folded over the job's output, line by line:
    the last end it said, cleared by a training line after it (`trains`: a requeued job's next start appends to the
    same .out and trains on)."""
    if "CANCELLED AT" in line:
        from loratui import slurm  # only for slurmstepd's line: most logs never print one

        said = slurm.said_end(line)
        if said is not None:
            return said
    return None if ended is not None and trains(line) else ended
