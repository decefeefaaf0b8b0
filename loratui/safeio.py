"""Writing into run directories without being led elsewhere.

A run directory is data that travels: copied, unpacked from a tarball, shared on a group box. Whatever is in
it may have been put there to turn loratui's writes against the user: `events.jsonl` a symbolic link to
~/.bashrc (a `stop` would append to it), `checkpoints/checkpoint-30` a link into another project (a resumed
trainer would save over it), a folder owned by someone else (root resuming `nobody`'s run). So every file
loratui appends to in a run directory is opened with O_NOFOLLOW, and a command about to write into an
existing run directory (resume, stop, the orphan relay, a new supervisor) first checks the whole directory:
it must be the user's own, with no link and nothing of another user anywhere in it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

MAX_ENTRIES = 100_000
"""Entries checked in one run directory (a run's checkpoints hold a few dozen files each)."""

_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class UnsafeRunDir(Exception):
    """A run directory loratui will not write into (a link in it, or not the user's own)."""


def open_append(path: Path | str, mode: int = 0o600) -> int:
    """An fd appending to `path` (created `mode`), never through a symbolic link (OSError, ELOOP) nor into
    a FIFO or device planted at the name (OSError: opened without blocking, then refused)."""
    fd = os.open(path, _APPEND | os.O_NONBLOCK, mode)  # a FIFO with no reader would block the open forever
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path}: not a regular file")
    os.set_blocking(fd, True)
    return fd


def append_file(path: Path | str, mode: int = 0o600) -> BinaryIO:
    """`open(path, "ab")`, never through a symbolic link (see `open_append`)."""
    return os.fdopen(open_append(path, mode), "ab")


def problem(run_path: Path) -> str:
    """Why loratui must not write into `run_path` ('' when it may): the directory (where it really is) or
    anything in it is not the user's own, or is a symbolic link, a FIFO or a device (a leftover control
    socket is fine)."""
    uid = os.getuid()
    try:
        real = run_path.resolve(strict=True)
        owner = os.stat(real).st_uid
    except OSError as exc:
        return f"{run_path}: cannot read the run directory ({exc.strerror or exc})"
    if owner != uid:
        return f"{run_path} belongs to another user (uid {owner})"
    seen = 0
    for folder, dirs, files in os.walk(real, onerror=None, followlinks=False):
        for name in dirs + files:
            seen += 1
            if seen > MAX_ENTRIES:
                return f"{run_path} holds over {MAX_ENTRIES} entries; not a run directory loratui wrote"
            entry = Path(folder) / name
            try:
                info = entry.lstat()
            except OSError:
                continue  # gone meanwhile (a trainer's rotation)
            shown = run_path / entry.relative_to(real)
            if stat.S_ISLNK(info.st_mode):
                return f"{shown} is a symbolic link (to {os.readlink(entry)!r})"
            if info.st_uid != uid:
                return f"{shown} belongs to another user (uid {info.st_uid})"
            if stat.S_ISFIFO(info.st_mode) or stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode):
                return f"{shown} is a FIFO or a device, not a file (reading it would hang or never end)"
    return ""


def check_run_dir(run_path: Path) -> None:
    """Raise UnsafeRunDir, in words saying what to do, unless loratui may write into `run_path`."""
    why = problem(run_path)
    if why:
        raise UnsafeRunDir(f"{why}; loratui never writes through a link or into what another user owns, "
                           "so it leaves this run alone: copy what you need from it into a run of your own")
