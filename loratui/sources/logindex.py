"""A sparse index of an event log, with checkpoints of the folded state and advice, cached beside the log.

A replay of a 1 GB log (5 M events) cannot hold its events (3.9 GB) nor fold them all before the first
frame. The index keeps, per block of events (~128 KiB of lines): where it starts, its first event's index
and time; the events of note and the first event of each step; and every `spacing` events a checkpoint:
the `RunState` and the `Advisor` folded up to there. A reader decodes only the blocks it shows; a seek
folds from the nearest checkpoint (at most `spacing` events), never from the first event.

The index of a file is saved as `events.idx` beside it (or nowhere, when the folder is not writable),
atomically (a temp file, fsync, rename), and reused while the log's first bytes, the recipe and the index
format agree and the log still holds, byte for byte, the lines the index ends with; a log that grew is
indexed from where the saved index ends, any other is indexed anew. A loratui run's supervisor keeps it
current while the run goes (`sources/indexer.py`). It is loaded by the first `update`, never by `of_file`,
so a viewer's first frame does not wait for it. It is data, never code: msgpack through `indexcodec.py`
(no pickle: loading one calls nothing). Run directories travel (a colleague's tarball unpacks as files you
own), so besides, an index is read only when it carries the HMAC of this user's signing key
(userstate.py), is ours and unwritable by others; an index from anywhere else is rebuilt, never loaded.
"""

from __future__ import annotations

import bisect
import hashlib
import hmac
import math
import os
import stat
import threading
import time
from array import array
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loratui import bounds, eventlog, events
from loratui.logic.advisor import Advisor
from loratui.logic.runstate import RunState
from loratui.sources import indexcodec
from loratui.sources.snapshot import freeze, gc_paused, is_of_note, thaw
from loratui.userstate import new_signer

FORMAT = 23
"""Bump when the index's layout (or RunState/Advisor's fields) change: older files are then rebuilt."""
BLOCK_BYTES = 1 << 17
BLOCK_EVENTS = 512
CHECKPOINTS = 256
"""About this many checkpoints whatever the log's length: bounds the index's size (~80 KiB each)..."""
MIN_SPACING = 2048
"""...but never more than one per this many events: a seek folds at most this many (~20 ms)."""
HEAD_BYTES = 1 << 16
FOLLOW_SAVE_GROWTH = 0.1
FOLLOW_SAVE_BYTES = 8 << 20
"""A follower saves the index when the log grew by this share and this many bytes since the last save: ~50
saves from 8 MiB to 1 GB, costing ~10 final saves in all; a replay after a crash extends at most that."""
END_BYTES = 1 << 12
"""The log's bytes before the index's end that a saved index must still find there."""


@dataclass
class Checkpoint:
    """The fold of the first `index` events, which end where block `block` starts."""

    index: int
    block: int
    t: float
    """The (monotonic) time of the last event folded."""
    state: dict[str, Any]
    advisor: bytes
    """The advisor, encoded without its recipe (indexcodec; a private copy per seek costs one decode)."""
    counts: tuple[int, int, int] = (0, 0, 0)


@dataclass
class LogIndex:
    """Blocks, steps, events of note and checkpoints of one log (see the module docstring)."""

    spacing: int
    key: tuple[Any, ...] = ()
    block_first: array = field(default_factory=lambda: array("q"))
    block_pos: array = field(default_factory=lambda: array("q"))
    block_t: array = field(default_factory=lambda: array("d"))
    step_values: array = field(default_factory=lambda: array("q"))
    step_index: array = field(default_factory=lambda: array("q"))
    notes: array = field(default_factory=lambda: array("q"))
    checkpoints: list[Checkpoint] = field(default_factory=list)
    tail: Checkpoint | None = None
    """The fold of every event indexed so far (where an extension resumes)."""
    end_pos: int = 0
    n_events: int = 0
    first_t: float | None = None
    last_t: float = -math.inf
    skipped: int = 0
    unknown: int = 0
    malformed: int = 0
    end_digest: str = ""
    """The hash of the log's `END_BYTES` before `end_pos` when saved (`fits` checks the log still has them)."""

    def notes_text(self, torn: bool = False) -> str:
        """What could not be read, as `LogContents.notes` says it."""
        return eventlog.LogContents([], self.skipped + int(torn), self.unknown, self.malformed).notes()


# -- where events come from -----------------------------------------------------------------------


class ListBlocks:
    """An event list in memory (imports, tests), cut in blocks of `BLOCK_EVENTS`."""

    def __init__(self, found: Sequence[Any], block: int = BLOCK_EVENTS) -> None:
        self.found = list(found)
        self.block = block

    def size(self) -> int:
        return len(self.found)

    def estimate_events(self) -> int:
        return len(self.found)

    def blocks(self, pos: int, tally: Any) -> Iterator[tuple[int, list[Any], int]]:
        for start in range(pos, len(self.found), self.block):
            end = min(start + self.block, len(self.found))
            yield start, self.found[start:end], end

    def read(self, pos: int, end: int) -> list[Any]:
        return self.found[pos:end]

    def add(self, more: Sequence[Any]) -> None:
        self.found.extend(more)


class FileBlocks:
    """An events.jsonl on disk, read in blocks of whole lines (a partial last line waits)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def estimate_events(self) -> int:
        with bounds.open_regular(self.path) as handle:
            head = handle.read(HEAD_BYTES)
        lines = head.count(b"\n")
        return self.size() * lines // max(1, len(head)) if lines else 0

    def blocks(self, pos: int, tally: Any) -> Iterator[tuple[int, list[Any], int]]:
        with bounds.open_regular(self.path) as handle:
            handle.seek(pos)
            pending = b""
            while True:
                chunk = handle.read(BLOCK_BYTES)
                if not chunk:
                    return
                data = pending + chunk
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    pending = data
                    continue
                pending = data[cut:]
                yield pos, eventlog.decode_block(data[:cut], tally), pos + cut
                pos += cut

    def read(self, pos: int, end: int) -> list[Any]:
        with bounds.open_regular(self.path) as handle:
            handle.seek(pos)
            return eventlog.decode_block(handle.read(end - pos), eventlog.tally())

    def first_event(self) -> Any:
        """The log's first event (its header, in a loratui log), or None."""
        found = next(iter(self.blocks(0, eventlog.tally())), (0, [], 0))[1]
        return found[0] if found else None

    def torn_tail(self, end_pos: int) -> bool:
        """Whether bytes after the last whole line wait (a torn last line, or one being written)."""
        return self.size() > end_pos


# -- building -------------------------------------------------------------------------------------


def advisor_bytes(advisor: Advisor) -> bytes:
    return indexcodec.encode(advisor, advisor.recipe)


def advisor_from(data: bytes, recipe: Any) -> Advisor:
    advisor = indexcodec.decode(data, recipe)
    if not isinstance(advisor, Advisor):
        raise indexcodec.IndexCodecError("not an advisor")
    return advisor


class Builder:
    """Extends an index block by block, folding state and advice as it goes."""

    def __init__(self, index: LogIndex, source: Any, recipe: Any) -> None:
        self.index, self.source, self.recipe = index, source, recipe
        self.tally = eventlog.tally(index.skipped, index.unknown, index.malformed)
        tail = index.tail
        # share=True: the live state appends to the very lists the saved checkpoints hold prefixes of
        self.state = thaw(tail.state, share=True) if tail else RunState()
        self.advisor = advisor_from(tail.advisor, recipe) if tail else Advisor(recipe)
        self._last_cp = index.checkpoints[-1].index if index.checkpoints else -index.spacing

    def run(self, stop: threading.Event | None = None, tail: bool = True) -> bool:
        """Index every whole line not yet indexed; False when `stop` was set on the way. `tail`: leave the
        fold of every event as the index's tail (a seek to the end starts there)."""
        index = self.index
        with gc_paused():
            for pos, found, end in self.source.blocks(index.end_pos, self.tally):
                if stop is not None and stop.is_set():
                    return False
                self._block(pos, found, end)
            if tail:
                index.tail = self.tail()
        return True

    def tail(self) -> Checkpoint:
        """The fold of every event indexed so far (reused while nothing was indexed since)."""
        tail = self.index.tail
        if tail is not None and tail.index == self.index.n_events:
            return tail
        return self._checkpoint(len(self.index.block_first))

    def _block(self, pos: int, found: list[Any], end: int) -> None:
        index = self.index
        n = index.n_events
        if n - self._last_cp >= index.spacing:
            index.checkpoints.append(self._checkpoint(len(index.block_first)))
            self._last_cp = n
            if len(index.checkpoints) > 2 * CHECKPOINTS:
                # A log indexed while it grew (a follower) began with the spacing of a small log: thin
                # the checkpoints to every other one, keeping the index's size bounded whatever the length.
                index.checkpoints = index.checkpoints[::2]
                index.spacing *= 2
        if found:
            first_t = max(index.last_t, found[0].t)
            index.block_first.append(n)
            index.block_pos.append(pos)
            index.block_t.append(first_t)
            if index.first_t is None:
                index.first_t = found[0].t
        steps, notes, last_t = self._fold(found, n, index.last_t)
        index.step_values.extend(s for s, _ in steps)
        index.step_index.extend(i for _, i in steps)
        index.notes.extend(notes)
        index.skipped, index.unknown, index.malformed = self.tally.counts()
        index.last_t, index.end_pos = last_t, end
        index.n_events = n + len(found)  # published last: readers trust rows below n_events only

    def _fold(self, found: list[Any], n: int, last_t: float) -> tuple[list[tuple[int, int]], list[int], float]:
        state_feed, advisor_feed = self.state.feed, self.advisor.feed
        top = self.index.step_values[-1] if self.index.step_values else -1
        steps: list[tuple[int, int]] = []
        notes: list[int] = []
        for i, event in enumerate(found, n):
            if event.t > last_t:
                last_t = event.t
            kind = type(event)
            if (kind is events.Step or kind is events.Log) and event.step > top:
                top = event.step
                steps.append((top, i))
            if kind is not events.Sample and is_of_note(event):
                notes.append(i)
            state_feed(event)
            advisor_feed(event)
        return steps, notes, last_t

    def _checkpoint(self, block: int) -> Checkpoint:
        index = self.index
        return Checkpoint(index.n_events, block, index.last_t, freeze(self.state),
                          advisor_bytes(self.advisor), self.tally.counts())


# -- the indexed log ------------------------------------------------------------------------------


class IndexedLog:
    """A log read through its index: events by position, by time, by step; folds at any position."""

    CACHE_BLOCKS = 16

    def __init__(self, source: Any, recipe: Any = None, spacing: int | None = None,
                 index: LogIndex | None = None) -> None:
        self.source, self.recipe = source, recipe
        self.index = index or LogIndex(spacing or max(MIN_SPACING, source.estimate_events() // CHECKPOINTS))
        self.complete = False
        """Whether the index covers every whole line there was when it last ran to the end."""
        self.decoded = 0
        """Events decoded for reading so far (what a test checks a seek costs)."""
        self.first_t: float | None = None
        self.last_t: float | None = None
        """Times read from the file's ends at open, for the clock while the index is being built."""
        self.cache_path: Path | None = None
        """Where the index is saved when it grows (None: kept in memory only)."""
        self.loading = False
        """A saved index waits to be loaded by the first `update` (the first frame does not wait for it)."""
        self.follower = False
        """Updated every few seconds while the log grows (the supervisor's indexer, a viewer of a live run):
        then an update refreshes no tail checkpoint and saves only when the log grew by `FOLLOW_SAVE_GROWTH`
        (a 1 GB log's index is ~60 MB: saving it, or folding a tail, every few seconds would cost more than
        folding the events); `save` at the end saves the rest. A one-shot reader saves whenever it grew."""
        self._saved_end = 0
        self._builder: Builder | None = None
        self._cache: OrderedDict[int, list[Any]] = OrderedDict()
        self._changed = threading.Condition()
        self._lock = threading.Lock()  # one builder at a time
        self._read_lock = threading.Lock()  # the block cache (the tick and a seek's worker both read)

    # -- building ---------------------------------------------------------------------------------

    @classmethod
    def of_list(cls, found: Sequence[Any], recipe: Any = None, spacing: int | None = None) -> "IndexedLog":
        every = spacing or max(MIN_SPACING, len(found) // CHECKPOINTS)
        log = cls(ListBlocks(found, min(BLOCK_EVENTS, every)), recipe, every)
        log.update()
        return log

    @classmethod
    def of_file(cls, path: Path, recipe: Any = None, cache: bool = True) -> "IndexedLog":
        """The log at `path`; its saved index, if one fits, is loaded by the first `update`."""
        source = FileBlocks(path)
        log = cls(source, recipe)
        log.cache_path = idx_path(path) if cache else None
        log.loading = cache
        # The clock starts at the first event and the position shows out of the last, before indexing.
        first = source.first_event()
        log.first_t = first.t if first is not None else None
        log.last_t = max((e.t for e in tail_events(path)), default=None)
        return log

    def update(self, stop: threading.Event | None = None) -> bool:
        """Index what was appended since (after loading the saved index); True when it reached the end.
        Saves the index when it grew (a follower: when it grew enough)."""
        with self._lock:
            self._load_saved()
            if self._builder is None or self._builder.index is not self.index:
                self._builder = Builder(self.index, self.source, self.recipe)
            done = self._builder.run(stop, tail=not self.follower)
        self.complete = done
        with self._changed:
            self._changed.notify_all()
        grown = self.index.end_pos - self._saved_end
        enough = max(FOLLOW_SAVE_BYTES, FOLLOW_SAVE_GROWTH * self.index.end_pos) if self.follower else 1
        if done and grown >= enough:
            self.save()
        return done

    def save(self) -> bool:
        """Save the index beside the log if it holds more than the saved one; True when written."""
        with self._lock:
            index, path = self.index, getattr(self.source, "path", None)
            if self.cache_path is None or path is None or index.end_pos == self._saved_end:
                return False
            if self._builder is not None and self._builder.index is index:
                index.tail = self._builder.tail()  # a follower's tail lags: an extension resumes from it
            index.key = index_key(path, self.recipe)
            index.end_digest = end_digest(path, index.end_pos)
            if not save_index(self.cache_path, index):
                return False
            self._saved_end = index.end_pos
            return True

    def load_saved(self) -> bool:
        """Take the saved index if it fits the log (what the first `update` does first); True if taken."""
        with self._lock:
            return self._load_saved()

    def _load_saved(self) -> bool:
        if not self.loading:
            return False
        try:
            path = self.source.path
            saved = load_index(self.cache_path, index_key(path, self.recipe), self.recipe)  # type: ignore[arg-type]
            if saved is None or not fits(path, saved):
                return False
            with self._read_lock:  # readers of the (still empty) index see the whole one next
                self.index, self._saved_end = saved, saved.end_pos
                self._cache.clear()
            with self._changed:
                self._changed.notify_all()
            return True
        finally:
            self.loading = False

    def wait_for(self, n: int, timeout: float | None = None) -> bool:
        """Block until `n` events are indexed (or the index is complete); True when they are."""
        with self._changed:
            return self._changed.wait_for(lambda: self.index.n_events >= n or self.complete, timeout)

    def add(self, more: Sequence[Any]) -> None:
        """Events appended to an in-memory log (a followed run)."""
        self.source.add(more)
        self.update()

    # -- reading ----------------------------------------------------------------------------------

    @property
    def n_events(self) -> int:
        return self.index.n_events

    def notes_text(self) -> str:
        torn = isinstance(self.source, FileBlocks) and self.complete and self.source.torn_tail(self.index.end_pos)
        return self.index.notes_text(torn)

    def read(self, start: int, end: int) -> list[Any]:
        """Events [start, end) (clamped to what is indexed)."""
        index = self.index
        end = min(end, index.n_events)
        if start >= end:
            return []
        out: list[Any] = []
        k = bisect.bisect_right(index.block_first, start) - 1
        while k < len(index.block_first) and index.block_first[k] < end:
            first = index.block_first[k]
            block = self._block(k)
            out.extend(block[max(0, start - first):end - first])
            k += 1
        return out

    def _block(self, k: int) -> list[Any]:
        with self._read_lock:
            return self._decoded_block(k)

    def _decoded_block(self, k: int) -> list[Any]:
        cached = self._cache.get(k)
        if cached is not None:
            self._cache.move_to_end(k)
            return cached
        index = self.index
        nxt = index.block_pos[k + 1] if k + 1 < len(index.block_pos) else index.end_pos
        found = self.source.read(index.block_pos[k], nxt)
        self.decoded += len(found)
        self._cache[k] = found
        if len(self._cache) > self.CACHE_BLOCKS:
            self._cache.popitem(last=False)
        return found

    def index_at(self, t: float) -> int:
        """How many events have their (monotonic) time at or before `t`."""
        index = self.index
        n = index.n_events
        k = bisect.bisect_right(index.block_t, t) - 1
        if k < 0:
            return 0
        if index.block_first[k] >= n:
            return n
        latest, count = index.block_t[k], 0
        for event in self._block(k):
            latest = max(latest, event.t)
            if latest > t:
                break
            count += 1
        return min(index.block_first[k] + count, n)

    def time_of(self, count: int) -> float:
        """The monotonic time of event `count - 1` (the last one shown at cursor `count`)."""
        index = self.index
        if count <= 0 or not index.block_first:
            return self.start_t
        k = bisect.bisect_right(index.block_first, count - 1) - 1
        latest = index.block_t[k]
        for event in self._block(k)[:count - index.block_first[k]]:
            latest = max(latest, event.t)
        return latest

    @property
    def start_t(self) -> float:
        first = self.index.first_t if self.index.first_t is not None else self.first_t
        return first if first is not None else 0.0

    @property
    def end_t(self) -> float:
        if not self.complete and self.last_t is not None:
            return max(self.last_t, self.index.last_t)
        return self.index.last_t if self.index.n_events else self.start_t

    def fold_at(self, count: int) -> tuple[RunState, Advisor]:
        """A fresh (state, advisor) over the first `count` events, folded from the nearest checkpoint."""
        index = self.index
        count = min(max(count, 0), index.n_events)
        marks = index.checkpoints + ([index.tail] if index.tail is not None else [])
        best = None
        for checkpoint in marks:  # a few hundred at most; the tail may sit past the last one
            if checkpoint.index <= count and (best is None or checkpoint.index >= best.index):
                best = checkpoint
        with gc_paused():
            if best is None:
                state, advisor = RunState(), Advisor(self.recipe)
                start = 0
            else:
                state, advisor = thaw(best.state), advisor_from(best.advisor, self.recipe)
                start = best.index
            for event in self.read(start, count):
                state.feed(event)
                advisor.feed(event)
        return state, advisor


def fits(path: Path, saved: LogIndex) -> bool:
    """Whether the log still holds what `saved` indexed: as long, and the same bytes where it ends (a log
    truncated, rewritten or replaced under the same first bytes gets a new index, never wrong answers)."""
    try:
        return (saved.end_pos <= FileBlocks(path).size() and saved.end_digest != ""
                and saved.end_digest == end_digest(path, saved.end_pos))
    except OSError:
        return False


def end_digest(path: Path, end: int) -> str:
    """The hash of the log's bytes before `end` (at most `END_BYTES`, the last of them a newline)."""
    with bounds.open_regular(path) as handle:
        handle.seek(max(0, end - END_BYTES))
        data = handle.read(min(end, END_BYTES))
    return hashlib.sha256(data).hexdigest() if data.endswith(b"\n") or end == 0 else ""


# -- the cache file -------------------------------------------------------------------------------


def idx_path(log: Path) -> Path:
    return log.with_name(log.name.removesuffix(".jsonl") + ".idx")


def index_key(path: Path, recipe: Any) -> tuple[Any, ...]:
    """What a saved index must agree on: format, the log's first bytes, the recipe (advice depends on it)."""
    with bounds.open_regular(path) as handle:
        head = hashlib.sha256(handle.read(HEAD_BYTES)).hexdigest()
    recipe_id = hashlib.sha256(repr(recipe).encode()).hexdigest() if recipe is not None else ""
    return (FORMAT, head, recipe_id)


def save_index(path: Path, index: LogIndex) -> bool:
    """Write the index (atomically, 0600); False when the folder is not writable, or not the user's own (a
    shared or another user's run directory: loratui writes nothing into it, and folds the log each time)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        if os.stat(path.parent).st_uid != os.getuid():
            return False
        signer = new_signer()
        if signer is None:  # nothing to sign with: an index we could not trust again is not worth writing
            return False
        try:  # the index holds no recipe: advisors are encoded apart, without it
            payload = indexcodec.encode(index)
        except (TypeError, ValueError, OverflowError):  # a value an index cannot hold (an int over 64 bits)
            return False
        signer.update(payload)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(SIGNED_MAGIC + signer.digest())
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())  # a crash after the rename finds the whole file, never a hole
        os.replace(tmp, path)
        _sweep(path)
        return True
    except OSError:
        tmp.unlink(missing_ok=True)
        return False


STALE_TMP_S = 600.0


def _sweep(path: Path) -> None:
    """Remove temp files a killed writer left (a 1 GB log's is ~60 MB); not one a writer may still fill."""
    cutoff = time.time() - STALE_TMP_S
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        try:
            if stale.lstat().st_mtime < cutoff:
                stale.unlink()
        except OSError:
            pass


SIGNED_MAGIC = b"loratui-index-msgpack-hmac-sha256\n"
"""Names the payload's kind too: an index of the pickle era is never taken for one."""


def _verified(data: bytes) -> memoryview | None:
    """The payload in `data` when this user's key signed it; None for anything else (never decoded)."""
    signer = new_signer()
    if signer is None:
        return None
    start = len(SIGNED_MAGIC) + signer.digest_size
    if not data.startswith(SIGNED_MAGIC) or len(data) <= start:
        return None
    payload = memoryview(data)[start:]
    signer.update(payload)
    return payload if hmac.compare_digest(signer.digest(), data[len(SIGNED_MAGIC):start]) else None


def load_index(path: Path, key: tuple[Any, ...], recipe: Any) -> LogIndex | None:
    """The saved index when this user's loratui signed it, it is ours, unwritable by others, loadable and of
    this key; else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO: no wait for a writer
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if info.st_uid != os.getuid() or info.st_mode & 0o022 or not stat.S_ISREG(info.st_mode):
            return None
        data = handle.read()
    payload = _verified(data)
    if payload is None:
        return None
    try:
        index = indexcodec.decode(payload)
    except Exception:  # a damaged file is rebuilt, whatever broke in it
        return None
    return index if isinstance(index, LogIndex) and index.key == key else None


TAIL_BYTES = 1 << 20


def last_step(path: Path) -> int | None:
    """The last step the log's final MiB names (a step or log event); None when it names none."""
    steps = [e.step for e in tail_events(path) if isinstance(e, (events.Step, events.Log))]
    return max(steps) if steps else None


def tail_events(path: Path) -> list[Any]:
    """The events of the log's last MiB of whole lines."""
    size = FileBlocks(path).size()
    with bounds.open_regular(path) as handle:
        handle.seek(max(0, size - TAIL_BYTES))
        data = handle.read()
    if size > TAIL_BYTES:
        data = data[data.find(b"\n") + 1:]  # the first line may be cut
    return eventlog.decode_block(data[:data.rfind(b"\n") + 1], eventlog.tally())
