"""Ctrl-C held while a run is being started, answered once the viewer can answer it.

From the moment the supervisor is spawned the run trains on its own, and Ctrl-C means "leave it training" (the
viewer prints how to attach and stop). Pressed during the start itself (the wait for the run's first event, the
viewer's imports), it used to end `loratui run` with status 130 and no word, the run going on unannounced. Held
here, it is raised where the viewer catches it."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any, Self


IGNORED_AT_START = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
"""Whether this process started with SIGINT ignored (`nohup loratui run ... &`, a shell's background job): read when
this module is first imported, before any handler of loratui's. A run started so hands that on to the command it
watches (`launch.spawn_supervisor`), which would have started with it ignored alone; a handler of ours in between
would otherwise become the default across exec."""


class HeldInterrupt:
    """SIGINT noted, not raised, from `hold()` until `release()` (which raises it then, once)."""

    def __init__(self) -> None:
        self.pressed = False
        self._previous: Any = None

    @classmethod
    def hold(cls) -> HeldInterrupt:
        held = cls()
        if threading.current_thread() is threading.main_thread():  # only the main thread may set a handler
            held._previous = signal.signal(signal.SIGINT, held._press)
        return held

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        """A start that raised restores the handler (its own error is what to say); one that did not stays held
        for the viewer's `release`."""
        if kind is not None:
            self.restore()

    def _press(self, signum: int, frame: FrameType | None) -> None:
        self.pressed = True

    def restore(self) -> None:
        """The handler as it was, without raising (the start failed: its own error is what to say)."""
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def release(self) -> None:
        """The handler as it was; a Ctrl-C pressed while held is raised now."""
        self.restore()
        if self.pressed:
            self.pressed = False
            raise KeyboardInterrupt
