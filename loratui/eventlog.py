"""Appending to and reading from a run's `events.jsonl`.

Several processes append (the supervisor's threads, the trainer): each event is one `write()` of one
whole line to a file opened with O_APPEND, so lines never interleave. A line reaches the kernel at once
(a `kill -9` of the writer loses nothing written); `fsync` runs on every state change and at most once a
second otherwise, so a power cut loses at most about a second.

A write cut short (the writer killed mid-event, a full disk) leaves a partial line. So that it can never
swallow another writer's next event, a writer that finds the file not ending in a newline starts its
event on a new line (the torn line stays alone, and readers skip it), and no event is over `MAX_EVENT`
bytes. That look and the write that follows are done under an exclusive `flock` of the log: without it a
writer killed mid-write between another's look and its write glued the other's event to its torn line
(3 in 40 kills). The kernel drops a dead writer's lock; a writer held up (SIGSTOP) holding it is waited
for at most `LOCK_WAIT` seconds, then the write goes ahead unlocked. A log that cannot be written (a full
disk) never stops the writer: events are dropped and counted, and the first write that succeeds again records
how many were lost.
"""

from __future__ import annotations

import fcntl
import gc
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from loratui import bounds, events

_KNOWN_KINDS = frozenset(c.__struct_config__.tag for c in events.AnyEvent.__args__)  # type: ignore[attr-defined]
"""The kinds this version decodes: a line of one of them that fails to decode is malformed, not newer."""
_DURABLE = (events.Header, events.State, events.End, events.Control, events.Checkpoint, events.TrainBegin)


MAX_EVENT = 1 << 20
"""The largest line an event may take; a bigger one is replaced by a notice saying so."""
LOCK_WAIT = 2.0
"""Seconds a writer waits for another's lock (one event's write takes microseconds)."""


class EventWriter:
    """Appends events to one log; safe to share between threads; never raises for a log it cannot write."""

    def __init__(self, path: Path, fsync_interval: float = 1.0) -> None:
        # Read access too: to see whether the file ends in a newline (another writer's torn line).
        # Never through a link: a copied run's events.jsonl may point at the user's ~/.bashrc.
        self._fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                           0o600)
        self._lock = threading.Lock()
        self._fsync_interval = fsync_interval
        self._last_fsync = time.monotonic()
        self.dropped = 0
        """Events lost to write errors (a full disk) since the last successful write."""
        self._drop_reason = ""

    def write(self, event: events.AnyEvent) -> bool:
        """Append one event; fsync when it changes the run's state or a second has passed. False when it
        could not be written (a full disk): counted, and reported once writing works again."""
        data = events.encode(event)
        if len(data) > MAX_EVENT:
            data = events.encode(events.Notice(
                t=event.t, level="warning", key="event_too_large",
                message=f"a {type(event).__name__} event of {len(data)} bytes was not recorded"))
        with self._lock:
            try:
                self._append(data, durable=isinstance(event, _DURABLE))
            except OSError as exc:
                self.dropped += 1
                self._drop_reason = exc.strerror or str(exc)
                return False
            if self.dropped:
                lost, self.dropped = self.dropped, 0
                self._try_append(events.encode(events.Notice(
                    t=time.time(), level="warning", key="disk_full",
                    message=f"{lost} event(s) could not be written to the log ({self._drop_reason}); "
                            "writing works again")))
        return True

    def write_until_written(self, event: events.AnyEvent, retry_s: float = 2.0,
                            gone: "Callable[[], bool]" = lambda: False) -> None:
        """Append an event the run cannot do without (its end): retry until the disk has room again."""
        while not self.write(event) and not gone():
            time.sleep(retry_s)

    def _append(self, data: bytes, durable: bool) -> None:
        locked = self._lock_file()
        try:
            self._append_locked(data, durable)
        finally:
            if locked:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _lock_file(self) -> bool:
        """Take the log's exclusive lock within `LOCK_WAIT` s; False (write unlocked) when another writer
        holds it that long (it is stopped) or the filesystem has no locks."""
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.0005)
            except OSError:  # ENOLCK and kin: a filesystem without flock
                return False

    def _append_locked(self, data: bytes, durable: bool) -> None:
        size = os.fstat(self._fd).st_size
        if size and os.pread(self._fd, 1, size - 1) != b"\n":
            data = b"\n" + data  # someone's write was cut short: leave their torn line alone
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        now = time.monotonic()
        if durable or now - self._last_fsync >= self._fsync_interval:
            os.fsync(self._fd)
            self._last_fsync = now

    def _try_append(self, data: bytes) -> None:
        try:
            self._append(data, durable=True)
        except OSError:
            self.dropped += 1

    def close(self) -> None:
        """Flush to disk and close."""
        with self._lock:
            if self._fd >= 0:
                try:
                    os.fsync(self._fd)
                except OSError:
                    pass
                os.close(self._fd)
                self._fd = -1


@dataclass
class LogTail:
    """Reads a growing log incrementally; a partial last line waits until its newline arrives."""

    path: Path
    offset: int = 0
    skipped: int = 0
    unknown: int = 0
    malformed: int = 0
    """Lines of a kind this version knows whose fields do not fit it (damaged, or written by a bug)."""
    _pending: bytes = field(default=b"", repr=False)

    def poll(self, max_bytes: int | None = 64 << 20) -> list[events.AnyEvent]:
        """Events appended since the last call (at most `max_bytes` of new data; None reads all)."""
        try:
            with bounds.open_regular(self.path) as handle:
                handle.seek(self.offset)
                chunk = handle.read(max_bytes) if max_bytes else handle.read()
        except FileNotFoundError:
            return []
        if not chunk:
            return []
        self.offset += len(chunk)
        data = self._pending + chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            self._pending = data
            return []
        self._pending = data[cut + 1:]
        return list(self._decode(data[:cut]))

    @property
    def whole(self) -> int:
        """Bytes of the log up to the end of the last whole line decoded."""
        return self.offset - len(self._pending)

    def finish(self) -> list[events.AnyEvent]:
        """Decode whatever partial last line is left (the writer is gone); a torn line is skipped."""
        rest, self._pending = self._pending, b""
        return list(self._decode(rest)) if rest.strip() else []

    def _decode(self, block: bytes) -> Iterator[events.AnyEvent]:
        for line in block.split(b"\n"):
            if not line.strip():
                continue
            event = events.decode_line(line)
            if event is None:
                self.skipped += 1
            elif isinstance(event, events.Unknown):
                # a kind we know that failed to decode is damaged, not newer
                if event.kind in _KNOWN_KINDS:
                    self.malformed += 1
                else:
                    self.unknown += 1
            else:
                yield event

    def counts(self) -> tuple[int, int, int]:
        """(skipped, unknown, malformed) so far."""
        return self.skipped, self.unknown, self.malformed


def tally(skipped: int = 0, unknown: int = 0, malformed: int = 0) -> LogTail:
    """A counter of unreadable lines for `decode_block` (a tail that reads nothing itself)."""
    return LogTail(Path(), skipped=skipped, unknown=unknown, malformed=malformed)


@dataclass(frozen=True)
class LogContents:
    """A whole log read at once, with what could not be read."""

    events: list[events.AnyEvent]
    skipped: int
    unknown: int
    malformed: int = 0

    def notes(self) -> str:
        """One line saying what was skipped, or ''."""
        parts = []
        if self.skipped:
            parts.append(f"{self.skipped} unreadable line{'s' if self.skipped > 1 else ''} skipped")
        if self.malformed:
            parts.append(f"{self.malformed} malformed event{'s' if self.malformed > 1 else ''} skipped "
                         "(a known kind with missing or wrong fields)")
        if self.unknown:
            parts.append(f"{self.unknown} event{'s' if self.unknown > 1 else ''} of a newer schema ignored")
        return "; ".join(parts)


def read_log(path: Path) -> LogContents:
    """Read a whole log, tolerating a torn last line, junk lines and unknown kinds."""
    try:
        data = bounds.read_bytes(path)
    except FileNotFoundError:
        return LogContents([], 0, 0)
    cut = data.rfind(b"\n") + 1
    tail = LogTail(path, offset=len(data), _pending=data[cut:])
    # The collector would walk every event decoded so far, again and again, as the list grows: that
    # tripled the time to open a 10-hour log (bench/replay_open.py). The events hold no cycles.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        found = [e for block in _blocks(data, cut) for e in _decode_block(tail, block)]
        found.extend(tail.finish())
    finally:
        if was_enabled:
            gc.enable()
    return LogContents(found, tail.skipped, tail.unknown, tail.malformed)


_CHUNK = 1 << 22
_bulk = msgspec.json.Decoder(events.AnyEvent)


def _blocks(data: bytes, cut: int) -> Iterator[bytes]:
    """data[:cut] (which ends with a newline) in blocks of about `_CHUNK` bytes of whole lines."""
    start = 0
    while start < cut:
        end = data.index(b"\n", min(start + _CHUNK, cut) - 1) + 1
        yield data[start:end]
        start = end


def decode_block(block: bytes, tally: LogTail) -> list[events.AnyEvent]:
    """Whole lines decoded in one call; line by line (skipping and counting in `tally`) if any is odd."""
    return _decode_block(tally, block)


def _decode_block(tail: LogTail, block: bytes) -> list[events.AnyEvent]:
    """Whole lines decoded in one call; line by line (skipping and counting) if any line is odd."""
    try:
        return _bulk.decode_lines(block)
    # junk, a torn line, a newer schema's kind or a line nested too deep somewhere in the block
    except (msgspec.DecodeError, RecursionError):
        return list(tail._decode(block))
