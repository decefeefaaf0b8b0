"""flash-attention failing inside its own package, read from the stack: its CUDA extension that does not load
(`import flash_attn_2_cuda` -> `ImportError: libcudart.so.12: cannot open shared object file`, an undefined
symbol), a name or attribute its caller expects and this version lacks. The message need not name flash-attention:
the innermost library frame does; and any error raised by its own setup.py while pip builds it (`pip install flash-attn`
-> `setup.py, line 17` -> `No module named 'wheel'`): the package never installed. Pure: a parsed exception in, a yes
or no out."""

from __future__ import annotations

import re

from loratui.logic.advisor.raised_where import raised_inside, users_file
from loratui.logic.tracebacks import Raised, origin

_BROKEN_TYPES = frozenset({"ImportError", "ModuleNotFoundError", "OSError", "AttributeError", "NameError"})


_BUILD = re.compile(r"/(?:pip-install-[^/]+/flash[-_]attn_[0-9a-f]{8,}|flash[-_]attn-\d[\w.]*|flash-attention)/setup\.py$",
                    re.I)
"""flash-attn's setup.py as pip runs it: in pip's build directory (`/tmp/pip-install-xbsgez9z/flash-attn_416c.../`),
an unpacked sdist (`flash_attn-2.5.5/`) or a clone (`flash-attention/`)."""


def raised_in_build(raised: Raised | None) -> bool:
    """Whether the error came out of flash-attn's own setup.py: its build failed, whatever the error."""
    return raised is not None and any(_BUILD.search(frame.path.replace("\\", "/")) for frame in raised.frames)


def _flash(path: str) -> bool:
    return "/flash_attn/" in path or "flash_attn_2_cuda" in path or "/flash_attn_interface" in path


def _elsewhere(path: str) -> bool:
    return origin(path).startswith("library:") or users_file(path)


def raised_in_flash(raised: Raised | None) -> bool:
    """Whether a load or mismatch error was raised inside flash-attention's package (its innermost library frame)."""
    if raised_in_build(raised):
        return True
    if raised is None or not raised.frames or raised.short_type not in _BROKEN_TYPES:
        return False
    return raised_inside(raised, _flash, _elsewhere) is not None
