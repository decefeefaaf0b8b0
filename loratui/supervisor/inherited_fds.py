"""The file descriptors beyond 0-2 that a watched command would inherit alone, and their handing on.

`loratui run -- python train.py 7>trace.log` (or under make's jobserver, or with a socket systemd passed) gives
the script fd 7 when it runs alone. Under loratui the command is started by a detached supervisor through a keeper,
each of which would close it (`close_fds`); so each hands these on to the next (`pass_fds`, the numbers unchanged)
and lets go of its own copy once the next has it. No loratui process keeps one: a reader of a pipe on fd 7 sees
its end when the script closes it, not when the supervisor exits. Only the command's first launch gets them, as
with its standard input; a restart (resume, applied advice) starts without them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

FLAG = "--passed-fds="
"""The supervisor's argument that names them (`--passed-fds=7,9`)."""


def inherited() -> tuple[int, ...]:
    """This process's inheritable descriptors beyond 0-2, in order. Python opens its own non-inheritable (PEP 446),
    so the inheritable ones are those its parent gave it (or a `pass_fds` of loratui's)."""
    for listing in ("/proc/self/fd", "/dev/fd"):
        try:
            names = os.listdir(listing)
        except OSError:
            continue
        found = []
        for name in names:
            fd = int(name)
            try:
                if fd > 2 and os.get_inheritable(fd):
                    found.append(fd)
            except OSError:  # the listing's own descriptor, closed by now
                continue
        return tuple(sorted(found))
    return ()


def let_go(fds: Iterable[int]) -> None:
    """Close this process's copies: the next process holds them now."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def as_argument(fds: Iterable[int]) -> list[str]:
    """The supervisor's argument for `fds` (none when there are none)."""
    fds = list(fds)
    return [FLAG + ",".join(map(str, fds))] if fds else []


def from_arguments(args: Iterable[str]) -> tuple[int, ...]:
    """The descriptors `as_argument` named."""
    for arg in args:
        if arg.startswith(FLAG):
            return tuple(int(fd) for fd in arg[len(FLAG):].split(",") if fd)
    return ()
