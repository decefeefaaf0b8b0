"""What restarting a run takes, whatever restarts it (a fixed recipe: restart.py; a watched command's fixed
config: config_fix.py): whose run it is, which variables carry over, files created exclusively, stopping the
old run and reading how it ended. Its own module so that those two need not import each other.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loratui import runstatus
from loratui.errors import ApplyError
from loratui.logic.recipe_edit import ADVICE_ENV
from loratui.rundir import RunDir

MAX_NAMES = 1000
"""How many `-N` names to try before giving up on a folder full of fixes (or of links)."""


def carried_env(stored: dict[str, str]) -> dict[str, str]:
    """The stored run settings' environment, less every variable loratui would not itself propose."""
    return {key: value for key, value in stored.items() if key in ADVICE_ENV}


def check_owner(run: RunDir) -> None:
    """Refuse a run directory that belongs to another user, or that this user's loratui did not make (a
    copy, a tarball: `RunDir.sealed`): its recipe, settings and command are someone else's."""
    try:
        owner = run.path.stat().st_uid
    except OSError as exc:
        raise ApplyError(f"{run.path}: cannot read the run directory ({exc.strerror or exc})") from None
    if owner != os.getuid():
        raise ApplyError(f"{run.path} belongs to another user (uid {owner}); loratui applies advice only to "
                         "your own runs: copy its recipe and start your own run with it")
    if not run.sealed():
        raise ApplyError(f"{run.path} was not started by your loratui (a copy, an unpacked tarball, or a run "
                         "from a loratui before run seals): its settings and command are never run again. "
                         f"Read its recipe ({run.recipe}) and start a run of your own with it")


def create_new(folder: Path, name: Callable[[int], str], text: str, mode: int = 0o644) -> Path:
    """Create the first of `name(1)`, `name(2)`... that did not exist: O_EXCL|O_NOFOLLOW, so an existing
    file or link, dangling or not, at a name is never written through; the next name is tried instead."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    for n in range(1, MAX_NAMES + 1):
        candidate = folder / name(n)
        try:
            fd = os.open(candidate, flags, mode)
        except FileExistsError:
            continue
        except OSError as exc:
            raise ApplyError(f"{candidate}: cannot create it ({exc.strerror or exc}); copy the file to a folder "
                             "you can write and run that copy") from None
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        return candidate
    raise ApplyError(f"{folder}: {MAX_NAMES} names like {name(1)} are taken; remove old fixes")


def stop_and_wait(run: RunDir, send: Any, wait_s: float) -> None:
    """Ask a run that still trains to stop, and wait (up to `wait_s`) for its end."""
    if not _ended(run):
        send("stop")
        deadline = time.monotonic() + wait_s
        while not _ended(run) and time.monotonic() < deadline:
            time.sleep(0.5)


def final_state(run: RunDir) -> str | None:
    """The state the run's end recorded (the one run status), or None while it has none."""
    end = runstatus.read(run).end
    return end.state if end is not None else None


def _ended(run: RunDir) -> bool:
    return runstatus.is_over(runstatus.read(run))
