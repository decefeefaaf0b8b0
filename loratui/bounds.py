"""Bounds on what loratui reads (issue 25 items 16-18): only regular files, and texts a parser can take.

Reads go through `open_regular`: a FIFO, device or socket where a file should be (a run directory's
`status.json`, a recipe, a data path of `/dev/zero`) is refused at once, never waited on or read forever.

A config is data someone else may have written. Three shapes make a parser freeze or crash instead of
failing: nesting deeper than its recursion (a 100k-deep list: RecursionError, and ruamel's scanner takes
quadratic time on deep flow lists, 10 s for the first 2000 levels), an integer longer than Python converts
(4300 digits: ValueError), and aliases that expand exponentially (a 566-byte alias bomb: 9^9 values).
The first two are found in the text by a linear scan; the third on the parsed data, where each alias is
the same object, counted once per use with a memo. Each gets a `Refused` naming the line.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator
from typing import IO, Any


class NotAFile(OSError):
    """A path that is not a regular file (an OSError, so every reader's "cannot read it" covers it)."""


def open_regular(path: str | os.PathLike[str]) -> IO[bytes]:
    """`path` opened for reading in binary, refused (NotAFile) unless it is a regular file. The open does
    not wait for a FIFO's writer (O_NONBLOCK), and the type is checked on the opened file (no race)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotAFile(errno.EINVAL, f"not a regular file (a {_kind(mode)}); loratui reads only files",
                           os.fspath(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | os.PathLike[str], limit: int | None = None) -> bytes:
    """A regular file's bytes (at most `limit`)."""
    with open_regular(path) as handle:
        return handle.read() if limit is None else handle.read(limit)


def read_text(path: str | os.PathLike[str], errors: str = "strict") -> str:
    """A regular file's UTF-8 text."""
    return read_bytes(path).decode("utf-8", errors)


MAX_LINE = 64 << 20
"""The longest line a line-by-line reader takes (a data example, a log line): 64 MiB."""


def bounded_lines(handle: IO[bytes], max_line: int | None = None) -> Iterator[bytes]:
    """The lines of `handle`, each read with at most `max_line` (MAX_LINE) bytes in memory: a longer one (a
    file that is one endless line) is Refused at its line number instead of filling memory."""
    max_line = max_line or MAX_LINE
    number = 0
    while True:
        line = handle.readline(max_line + 1)
        if not line:
            return
        number += 1
        if len(line) > max_line:
            raise Refused(number, f"line {number} is over {max_line >> 20} MiB long (one example a line?)")
        yield line


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "directory" if stat.S_ISDIR(mode) else "special file"


class Refused(ValueError):
    """The text is past a bound: `line` (1-based) and what is wrong there."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line, self.message = line, message


MAX_DEPTH = 64
"""Nesting levels (block indentation plus flow brackets): LLaMA-Factory and axolotl configs use 3 or 4."""
MAX_DIGITS = 1000
"""The longest run of digits a value may have (any real setting has under 20)."""
MAX_VALUES = 100_000
"""Values the config holds once its aliases are expanded (a large real config holds a few hundred)."""
BOM = "\ufeff"
_DIGITS = re.compile(r"[0-9_]{%d,}" % (MAX_DIGITS + 1))
_BRACKETS = re.compile(r"[\[\]{}]")


def check_text(text: str) -> None:
    """Refused at the first line nested deeper than MAX_DEPTH or holding an over-long number."""
    match = _DIGITS.search(text)
    if match:
        raise Refused(_line_of(text, match.start()), f"a number of {match.end() - match.start()} "
                              f"digits (over {MAX_DIGITS}); no setting takes one: fix that value")
    too_deep = _deep_flow(text)
    if too_deep is None:
        too_deep = _deep_block(text)
    if too_deep is not None:
        raise Refused(too_deep, f"nested more than {MAX_DEPTH} levels deep; a config is a few "
                              "levels of `key: value`: fix the file")


MAX_MESSAGE = 2000
"""The longest message loratui prints about one problem."""


def clip(message: str, limit: int = MAX_MESSAGE) -> str:
    """`message` cut in its middle to `limit` characters (a quoted 10 MB value): the start says where,
    the end what to do."""
    if len(message) <= limit:
        return message
    head, tail = limit * 2 // 3, limit // 3
    return f"{message[:head]} … ({len(message) - head - tail} characters cut) … {message[-tail:]}"


def check_toml(text: str) -> None:
    """check_text, and dotted keys of over MAX_DEPTH parts (`a.a.a...b = 1`: tomllib takes quadratic time
    and memory on them, 0.8 s for 10 000 parts; a 100 000-part key was killed for memory)."""
    check_text(text)
    for number, line in enumerate(text.split("\n"), 1):
        key = line.partition("=")[0]
        if key.count(".") > MAX_DEPTH:
            raise Refused(number, f"a key of over {MAX_DEPTH} dotted parts; fix that line")


def check_expanded(data: Any, line: int = 1) -> None:
    """Refused when the parsed data expands (aliases followed) to over MAX_VALUES values, or an
    alias refers to a collection that holds it (a cycle)."""
    sizes: dict[int, int] = {}

    def size(node: Any, open_: frozenset[int]) -> int:
        if not isinstance(node, (dict, list)):
            return 1
        key = id(node)
        if key in open_:
            raise Refused(line, "an alias refers to a list or mapping that contains it; fix the file")
        if key not in sizes:
            inner = open_ | {key}
            items = node.values() if isinstance(node, dict) else node
            total = 1
            for item in items:
                total += size(item, inner)
                if total > MAX_VALUES:
                    raise Refused(line, f"its aliases (`*name`) expand to over {MAX_VALUES} values; a "
                                          "config that big is not a training config: fix the file")
            sizes[key] = total
        return sizes[key]

    size(data, frozenset())


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _deep_flow(text: str) -> int | None:
    """The line where `[`/`{` nesting first passes MAX_DEPTH (quotes not parsed: only ever stricter)."""
    depth = 0
    for match in _BRACKETS.finditer(text):
        depth = depth + 1 if match.group() in "[{" else max(0, depth - 1)
        if depth > MAX_DEPTH:
            return _line_of(text, match.start())
    return None


def _deep_block(text: str) -> int | None:
    """The line where indentation nesting first passes MAX_DEPTH."""
    stack: list[int] = []
    for number, line in enumerate(text.split("\n"), 1):
        body = line.lstrip(" ")
        if not body.strip() or body.startswith("#"):
            continue
        indent = len(line) - len(body)
        while stack and stack[-1] >= indent:
            stack.pop()
        stack.append(indent)
        if len(stack) > MAX_DEPTH:
            return number
    return None
