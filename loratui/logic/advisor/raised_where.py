"""Which package an exception was raised in, read from its stack innermost-out: a package's own frame counts only
while no other library's or the user's code stands inside it (then that code raised it, and the package only called
out further along). Pure: a parsed exception in, a frame's path out."""

from __future__ import annotations

from collections.abc import Callable

from loratui.logic.tracebacks import Raised, origin


def users_file(path: str) -> bool:
    """The user's own file (not Python's: Windows' `C:/Python310/lib/ctypes` reads as no library's)."""
    return origin(path).startswith("user:") and "/lib/" not in path.lower()


def raised_inside(raised: Raised, own: Callable[[str], bool], other: Callable[[str], bool]) -> str | None:
    """The innermost frame's path (with `/` separators) that `own` claims, when no frame that `other` claims
    comes before it from the inside; None otherwise."""
    for frame in reversed(raised.frames):
        path = frame.path.replace("\\", "/")
        if own(path):
            return path
        if other(path):
            return None  # another library or the user's code raised it, with the package further out
    return None
