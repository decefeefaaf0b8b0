"""Why a run failed, in one line and in a short tail, from its End event's error text.

The supervisor records the trainer's last stderr lines, preceded by its own lines ("the trainer was killed
by SIGKILL", "rank 1 failed; ..."). A library's FutureWarning printed at import time often fills that tail:
the reason must come first and the noise must not push it off the screen. Pure: no Textual.
"""

from __future__ import annotations

import re

from loratui import events
from loratui.text import inert

_OWN = re.compile(r"^(the (?:trainer|command) was killed by \w+|rank \d+ failed\b.*|\S+ failed; torchrun stopped.*)$")
"""Lines the supervisor writes above the stderr tail: they say what happened, so they lead."""
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Fault|Failure)\b.*")
"""A traceback's last line: `peft.utils.error.NoMatchingPeftModuleError: Target modules ...`."""
_WARNING = re.compile(r"\b\w*Warning\b:|^\s*warnings\.warn\(")
"""`.../file.py:12: FutureWarning: ...` and the source line Python prints under it."""


def _lines(error: str) -> list[str]:
    return [line for line in inert(error).split("\n") if line.strip()]


def without_warnings(lines: list[str]) -> list[str]:
    """The lines minus Python warnings (a warning line and the indented source line under it)."""
    kept: list[str] = []
    skip_indented = False
    for line in lines:
        if _WARNING.search(line):
            skip_indented = True
            continue
        if skip_indented and line.startswith((" ", "\t")):
            continue
        skip_indented = False
        kept.append(line)
    return kept


def reason(end: events.End | None) -> str:
    """One line saying why the run failed ('' when it did not fail or nothing was recorded)."""
    if end is None or end.state != events.FAILED:
        return ""
    lines = without_warnings(_lines(end.error))
    own = [line for line in lines if _OWN.match(line)]
    if own:
        return own[0]
    found = [line for line in lines if _EXCEPTION.match(line)]
    if found:
        return found[-1]
    if lines:
        return lines[-1]
    if end.signal:
        return f"the trainer was killed by {end.signal}"
    return f"the trainer exited with code {end.exit_code}" if end.exit_code is not None else "the run failed"


def in_a_line(end: events.End) -> str:
    """What ended the run, in one line: the failure's reason, else the error's first line (Slurm's word on a
    cancelled job), else ''. Never the warnings a library printed on its way out."""
    if end.state == events.FAILED:
        return reason(end)
    lines = without_warnings(_lines(end.error))
    return lines[0] if lines else ""


def tail(end: events.End | None, most: int = 15) -> list[str]:
    """The failure's last `most` lines for a terminal: the supervisor's own lines first, warnings out."""
    if end is None:
        return []
    lines = without_warnings(_lines(end.error))
    own = [line for line in lines if _OWN.match(line)]
    rest = [line for line in lines if not _OWN.match(line)]
    return own + rest[-max(0, most - len(own)):] if most > len(own) else own[:most]
