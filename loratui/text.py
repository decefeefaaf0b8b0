"""Untrusted text made inert before it reaches a terminal.

Trainer output, data and recipe strings, replayed or imported logs, paths and error messages can hold
terminal escapes: `ESC[2J` clears the screen, OSC 0 retitles the terminal, OSC 8 plants a hyperlink, a
stray SGR colour runs on past the line. Everything loratui did not write itself goes through `inert`
before it is shown. Complete escape sequences are dropped (colours included: a line keeps the pane's
style); any control character left over is shown as its visible Unicode picture (ESC as ␛, a lone CR as
␍), so nothing is hidden and nothing acts. Bidirectional controls (U+202E RIGHT-TO-LEFT OVERRIDE, the
isolates U+2066-2069, the marks) reorder what a terminal draws, so `evil\u202etxt.exe` reads as another
name: they are shown as <U+202E>. Pure: no Textual, no Rich.
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
from typing import TextIO

_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"  # CSI (7- or 8-bit): cursor moves, erase, SGR colours
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"  # OSC/DCS/SOS/PM/APC
    r"|\x1b[ -/]*[0-~]"  # the two-character escapes (ESC c reset, ESC 7 save cursor, ESC ( B charset)
)
"""Escape sequences. Of an unterminated OSC/DCS only the introducer goes: its text stays visible."""

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 controls but tab and newline, DEL, the C1 controls, and the bidirectional formatting controls."""

_PICTURES = {0x7F: "␡"}


def _picture(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: ␛ ␍ ␈ ␇ ...
    if code <= 0x9F:
        return _PICTURES.get(code, f"<{code:02x}>")
    return f"<U+{code:04X}>"  # a bidi control: named, so the text around it keeps its order


def inert(text: str, newlines: bool = True) -> str:
    """`text` with escape sequences dropped and every other control character made visible.

    A line ending's CR (CRLF) is dropped; with `newlines=False` (a title, a notification, one line of a
    status bar) a newline is shown as ⏎ too."""
    text = _SEQUENCE.sub("", text).replace("\r\n", "\n")
    if text.endswith("\r"):
        text = text[:-1]
    if not newlines:
        text = text.replace("\n", "⏎")
    return _CONTROL.sub(_picture, text)


def inert_lines(lines: list[str] | tuple[str, ...]) -> list[str]:
    """Each line made inert, one line each (an embedded newline is shown, not obeyed)."""
    return [inert(line, newlines=False) for line in lines]


def for_terminal(message: str, stream: TextIO) -> str:
    """`message` wrapped at the width of the terminal `stream` is (piped or in a file it stays whole, one line
    to grep): a terminal broke a long error mid-word, a path or `file:line:key` in two. Words are never cut
    and none changes; continuation lines are indented, so each message still reads as one."""
    width = terminal_width(stream)
    if width < 20:
        return message
    return "\n".join(line if len(line) < width else _wrap(line, width - 1) for line in message.split("\n"))


def say_error(message: str) -> None:
    """A message on standard error, wrapped at the terminal's width (whole when piped): the CLI's, the launch's and
    its checks' one printer."""
    print(for_terminal(message, sys.stderr), file=sys.stderr)


def terminal_width(stream: TextIO) -> int:
    """The columns of the terminal `stream` writes to; 0 when it is piped, a file, or no real file (a test's
    capture) or closed."""
    try:
        return os.get_terminal_size(stream.fileno()).columns if stream.isatty() else 0
    except (AttributeError, OSError, ValueError):
        return 0


def wrap_line(line: str, width: int, indent: str) -> str:
    """One line folded at `width` columns between words, continuation lines under `indent`: no word is cut at a
    hyphen or anywhere else (a path, a `file:line:key` or a number stays whole on its line)."""
    return textwrap.fill(line, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)


def _wrap(line: str, width: int) -> str:
    # The first word ("loratui:") stays with the second (a path too long for a line): never alone above it.
    glued = line.replace(" ", "\0", 1) if "\0" not in line else line
    return wrap_line(glued, width, "  ").replace("\0", " ")
