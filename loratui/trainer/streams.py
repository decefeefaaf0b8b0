"""The trainer's stdout and stderr must not kill training when the disk they go to is full.

They are files in the run directory (the supervisor tails them). The Trainer's own `print(logs)` raised
`OSError: No space left on device` and ended a run that needed no disk; these wrappers drop what cannot
be written and count it instead.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO


class TolerantStream:
    """A text stream whose writes never raise OSError (what is lost is counted)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.lost = 0

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError:
            self.lost += len(text)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError:
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def install() -> None:
    """Wrap this process's stdout and stderr."""
    sys.stdout = TolerantStream(sys.stdout)  # type: ignore[assignment]
    sys.stderr = TolerantStream(sys.stderr)  # type: ignore[assignment]
