"""`loratui stacks`: each trainer rank dumps every thread's Python stack on SIGUSR1 (faulthandler), into
`stacks.rank<N>.txt` in the run directory, without stopping. Set up first thing, before heavy imports."""

from __future__ import annotations

import faulthandler
import os
import signal
from pathlib import Path
from typing import IO

from loratui.rundir import stacks_file
from loratui.safeio import open_append

STACKS_SIGNAL = signal.SIGUSR1
_files: list[IO[bytes]] = []  # kept open for the process's life: faulthandler writes to the descriptor


def arm(run_path: Path) -> None:
    """Register the dump for this rank (a no-op where the platform has no SIGUSR1)."""
    if not hasattr(faulthandler, "register"):
        return
    # never through a link planted at the name
    handle = os.fdopen(open_append(stacks_file(run_path, os.environ.get("RANK", "0"))), "ab", buffering=0)
    _files.append(handle)
    faulthandler.register(STACKS_SIGNAL, file=handle, all_threads=True, chain=False)
