"""The line prefix that a launcher, logger, container runtime or forum puts before every line of a text.

The same log reaches the reader wrapped in the dialect of where it was copied from: torchrun's `[rank0]: `, `srun
--label`'s `0: `, a logger's `2024-06-01 12:00:00,123 - INFO - `, `kubectl logs --timestamps`' RFC 3339 time, docker
compose's `trainer-1  | `, pdsh's `worker-1: `, Open MPI's `[1,0]<stderr>:`, a log viewer's `[1824] ` line numbers, a
quote reply's `> `.
A prefix that the lines of a text share is not part of the text: `LinePrefix` learns its shape (its digits, levels
and padding vary; the rest is literal) from the text's first lines and strips it where text enters the reader, once,
so every reader after it (records, bars, tracebacks, the word model) reads the lines as printed.

A prefix is learned only where most of the first lines carry one of the same shape: one line's `ERROR: ` or `0: `
is its text, not a wrapping. Per line it costs one anchored regex match (none once the first lines said no prefix).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_LEVELS = r"(?:TRACE|DEBUG|INFO|NOTICE|SUCCESS|WARN|WARNING|ERROR|CRITICAL|FATAL)"
_TIME = r"\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?\]?"
"""A logger's or kubectl's timestamp (`2024-06-01 12:00:00,123`, `2024-06-01T12:00:00.123456789Z`), maybe bracketed."""
_WHERE = r"[\w.<>-]{1,80}:[\w<>.-]{1,80}:\d{1,6}"
"""loguru's `{name}:{function}:{line}` (`__main__:main:42`)."""
_TOKEN = (
    rf"{_TIME}"
    r"|\[(?:rank|Rank |RANK |default)?\d{1,5}\]:?"  # torchrun's `[rank0]:` (older: `[default0]:`), a launcher's `[0]`
    r"|\[\d{1,7}\]"  # a log viewer's line number, a launcher's pid: `[1824] `
    r"|\[\d{1,5},\d{1,5}\]<std(?:out|err)>:"  # Open MPI `mpirun --tag-output`
    r"|[A-Za-z][\w.-]{0,60}-\d{1,4}[ \t]+\|"  # docker compose's `trainer-1  |`
    r"|[A-Za-z][\w.]{0,60}-\d{1,4}:(?=[ \t])"  # pdsh's host (DeepSpeed's multi-node launcher): `worker-1: `
    rf"|\[?{_LEVELS}\]?(?=[ \t])"  # a level between separators (`- INFO -`, `| ERROR |`, `[WARNING]`)
    rf"|{_WHERE}"
    r"|\d{1,5}:(?=[ \t]|$)"  # `srun --label`'s task number
    r"|>"  # a quote reply
)
_STEP = re.compile(rf"(?:{_TOKEN})(?:[ \t]+[|-](?=[ \t]|$))?[ \t]*")
"""One token of a prefix and the separator after it (`2024-06-01 12:00:00,123 - `, `| ERROR    | `)."""
_NUMBER_LEFT = re.compile(r"[-+]?\d[\d.eE+-]*[ \t]*$")
_BARE_NUMBER = re.compile(r"\[?\d+\]?:?[ \t]*$")
"""A cut that is a number alone (`10: `, `[10] `) before a number alone: `10: 2.31` is a step and its loss, not a
task's tag before a number."""
_FIRST = frozenset("[>0123456789")
"""How a prefix may begin, besides a letter (a compose service, a pdsh host, a level)."""


def prefixes_of(line: str) -> list[str]:
    """The decorations at the start of one line, shortest first, each a run of tokens (times, tags, levels, names)
    and separators cut where it may end: at a space, after a tag's `]:` or `>:`, or at the line's end (empty when
    none: what most lines begin with costs one failed match)."""
    if not line or not (line[0] in _FIRST or line[0].isalpha()):
        return []
    cuts: list[str] = []
    end = 0
    while (step := _STEP.match(line, end)) is not None and step.end() > end:
        end = step.end()
        if (line[end - 1] in " \t" or line.endswith(("]:", ">:"), 0, end) or end == len(line)) \
                and not (_NUMBER_LEFT.match(line, end) and _BARE_NUMBER.match(line[:end])):
            cuts.append(line[:end])
    return cuts


_SOURCE = (r"\[(?:rank|Rank |RANK |default)\d+\]|\[\d+,\d+\]<std(?:out|err)>|^\d+:(?=[ \t]|$)"
           r"|[A-Za-z][\w.]*-\d+(?=[ \t]*[|:])")
"""The part of a prefix that says which process printed the line (a rank, a task, a host, a container): where the
lines of several interleave, it is what tells them apart (a traceback's rank, the OOM's GPU), so it is no wrapping."""
_PIECE = re.compile(rf"(?P<source>{_SOURCE})|(?P<level>\b{_LEVELS}\b)|(?P<digits>\d+)|(?P<space>[ \t]+)|(?P<other>.)",
                    re.DOTALL)

WINDOW = 20
"""The first nonblank lines that may teach the prefix."""
SHARE = 0.6
"""The share of those lines that must carry prefixes of the one shape."""
LIVE_AGREE = 3
"""Read live (no look-ahead), this many lines of the one shape, and `SHARE` of the lines so far, teach it."""


def shape_of(prefix: str) -> str:
    """A regex for prefixes shaped like this one: digits (times, line numbers), level names and padding vary, the rest
    is literal, the process that printed the line included (`[rank1]` is another shape than `[rank0]`: where ranks
    interleave, no one shape is on most lines and the tags stay); one space after it is part of it (what follows
    keeps its own indentation)."""
    out: list[str] = []
    for piece in _PIECE.finditer(prefix.rstrip(" \t")):
        kind = piece.lastgroup  # a `source` is literal, as `other` is
        out.append(_LEVELS if kind == "level" else r"\d+" if kind == "digits" else r"[ \t]+" if kind == "space"
                   else re.escape(piece.group()))
    return "".join(out) + "[ \t]?"


@dataclass
class LinePrefix:
    """Learns the prefix a text's lines share and strips it: `lookahead` with the text's first lines at hand (then
    `strip` each line), or `live` as the lines come, holding back the first few while they may teach it."""

    shape: re.Pattern[str] | None = None
    _counts: dict[str, int] = field(default_factory=dict)
    _seen: int = 0  # nonblank lines looked at while learning
    _held: list[tuple[str, float]] = field(default_factory=list)  # `live`: lines of one shape, waiting for more
    _held_shapes: set[str] = field(default_factory=set)  # the shapes every held line carries

    @property
    def learning(self) -> bool:
        return self.shape is None and self._seen < WINDOW

    def lookahead(self, lines: list[str]) -> None:
        """Decide from the text's first lines (at most `WINDOW` nonblank ones, or all of a shorter text)."""
        for line in lines:
            if not self.learning:
                break
            self._count(line)
        self._decide(2)

    def strip(self, line: str) -> str:
        """The line without the learned prefix (as it is where it has none)."""
        found = self.shape.match(line) if self.shape is not None else None
        return line[found.end():] if found else line

    def live(self, line: str, t: float = 0.0) -> list[tuple[str, float]]:
        """The lines (with their times) ready to read after this one, stripped once the prefix is known; while the
        lines so far carry one shape and too few of them to decide, they wait (at most `LIVE_AGREE` - 1)."""
        if not self.learning:
            return self._release() + [(self.strip(line), t)]
        if not line.strip():
            if self._held:
                self._held.append((line, t))
                return []
            return [(line, t)]
        shapes = self._count(line)
        ready: list[tuple[str, float]] = []
        if self._held and not shapes & self._held_shapes:
            ready = self._release()  # the run of one shape ends here: its lines are read as they are
        if not shapes:
            return ready + [(line, t)]
        self._held_shapes = shapes & self._held_shapes if self._held else shapes
        self._held.append((line, t))
        if self._decide(LIVE_AGREE) or not self.learning:
            return ready + self._release()
        return ready

    def flush(self) -> list[tuple[str, float]]:
        """The lines still held at the text's end, read as `lookahead` would decide on them."""
        if self._held:
            self._decide(2)
        return self._release()

    def _release(self) -> list[tuple[str, float]]:
        held, self._held, self._held_shapes = self._held, [], set()
        return [(self.strip(line), t) for line, t in held]

    def _decide(self, need: int) -> bool:
        """Take the most common shape where it has `need` lines (or the only nonblank line) and `SHARE` of them."""
        # the most common shape, the longest of those as common (every line's time and level, not its time alone)
        best, count = max(self._counts.items(), key=lambda kv: (kv[1], len(kv[0])), default=("", 0))
        alone = need == 2 and self._seen == 1  # a text of one line: its prefix, if it has one
        if self.shape is None and count and (count >= need or alone) and count >= SHARE * self._seen:
            self.shape = re.compile(best)
        if need == 2:
            self._seen = WINDOW  # decided from the whole window: no prefix, or this one
        return self.shape is not None

    def _count(self, line: str) -> set[str]:
        """Count the shapes of one line's prefixes, every cut of its decoration (a logger's time and level, then the
        text's own time: only the first is every line's); blank lines do not count."""
        if not line.strip():
            return set()
        self._seen += 1
        shapes = {shape_of(cut) for cut in prefixes_of(line)}
        for shape in shapes:
            self._counts[shape] = self._counts.get(shape, 0) + 1
        return shapes


_CODE_EDGE = re.compile(r"^(\s*)`(?!`)|(?<!`)`(\s*)$")
"""A single backtick at a line's start or end: where an issue's inline code span opens or closes around pasted lines."""


def without_code_span_edge(line: str) -> str:
    """The line without the backtick of an inline code span that a forum paste opened on a line before it or closes on
    a line after it (`` `blk.33.ffn_up.weight ...`` first, ``Killed` `` last): the line's one backtick, at an edge,
    is no part of what the program printed. Fences (```), paired quotes and a backtick inside the line stay."""
    if line.count("`") != 1:
        return line
    return _CODE_EDGE.sub(lambda m: m.group(1) or m.group(2) or "", line, count=1)
