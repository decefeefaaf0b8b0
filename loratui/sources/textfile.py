"""Reading a text file or stream that may be anything: streamed line by line, each line decoded on its own.

A 100 MB log takes bounded memory, a line of another encoding (a Windows console's cp1252 or GBK) cannot
stop the read, a UTF-16 file with its byte-order mark is read as text, and a binary file is named as such.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from typing import IO

MAX_LINE = 1 << 16
"""Bytes read at most as one line: a longer one (a binary blob, a minified dump) comes in pieces."""
PROBE = 8192


class BinaryFile(Exception):
    """The stream holds NUL bytes and no UTF-16 byte-order mark: it is not a log."""


def lines(handle: IO[bytes]) -> Iterator[str]:
    """The stream's lines without their newlines; raises BinaryFile before the first line of a binary one."""
    if not hasattr(handle, "peek"):
        handle = io.BufferedReader(handle)  # type: ignore[arg-type]
    head = handle.peek(PROBE)[:PROBE]  # type: ignore[attr-defined]
    if not head:  # at its end already: on a terminal, reading on would wait for a second Ctrl-D
        return iter(())
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return _utf16(handle)
    if b"\0" in head:
        raise BinaryFile("NUL bytes")
    return _utf8(handle)


def utf16_header(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a loratui event log re-saved as UTF-16: read as text it would be "no problems
    found" in 152 lines of training text, when it is a run's log that needs converting back."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(PROBE)
    except OSError:
        return False
    if not head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return False
    first = head.decode("utf-16", errors="replace").split("\n", 1)[0].replace(" ", "")
    return first.startswith("{") and '"kind":"header"' in first


def _utf8(handle: IO[bytes]) -> Iterator[str]:
    first = True
    while raw := handle.readline(MAX_LINE):
        if first and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        first = False
        yield raw.decode("utf-8", errors="replace").rstrip("\r\n")


def _utf16(handle: IO[bytes]) -> Iterator[str]:
    text = io.TextIOWrapper(handle, encoding="utf-16", errors="replace")  # type: ignore[type-var]
    while line := text.readline(MAX_LINE):
        yield line.rstrip("\r\n")
