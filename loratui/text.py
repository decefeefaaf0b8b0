"""Making text that loratui did not write inert before it reaches a terminal.

Trainer output, data and recipe strings, replayed or imported logs may hold escape sequences (clear the
screen, retitle the terminal, hyperlinks) and control characters. Displayed raw they can wipe or hijack
the user's terminal; `inert` drops escape sequences and shows other control characters visibly.
"""

from __future__ import annotations

import re

_ESCAPES = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC ... BEL/ST (titles, hyperlinks)
    r"|\x1b[P_^X][^\x1b]*(?:\x1b\\)?"  # DCS, APC, PM, SOS strings
    r"|\x1b\[[0-?]*[ -/]*[@-~]?"  # CSI (colours, cursor moves, clear screen)
    r"|\x1b[ -/]*[0-~]?"  # other ESC sequences, or a bare ESC
    r"|\x9b[0-?]*[ -/]*[@-~]?"  # 8-bit CSI
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def inert(text: str) -> str:
    """`text` with escape sequences removed and other control characters shown as `^X` / `\\xNN`."""
    text = _ESCAPES.sub("", text)
    return _CONTROLS.sub(_visible, text)


def _visible(match: re.Match[str]) -> str:
    char = match.group(0)
    code = ord(char)
    if code < 0x20:
        return "^" + chr(code + 0x40)
    return f"\\x{code:02x}"
