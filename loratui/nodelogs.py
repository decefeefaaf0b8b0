"""One run written by several nodes: each node appends only to its own log, readers merge them.

A shared filesystem (NFS, Lustre, GPFS) makes an append atomic on one host only, so in a multi-node Slurm
job node 0 writes the run's own `events.jsonl` and node k writes `nodes/<node>/events.jsonl` (a run
directory of its own: its supervisor, trainer ranks, samples, output). A reader merges them into the one
run the views know: node k's GPUs become GPU k*100+i ("GPU 103" is node 1's GPU 3), its ranks keep their
global numbers, its output and notices are prefixed with the node's name, its own state and end become
notices (node 0 speaks for the run), and its times are moved onto node 0's clock by the offsets both
measured against the shared filesystem's clock when they started (Header.clock_offset).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from loratui import events
from loratui.eventlog import LogTail
from loratui.rundir import replace_file

NODES = "nodes"
GPU_STRIDE = 100
"""Node k's GPU i is GPU k*GPU_STRIDE+i in the merged run."""
DISCOVER_S = 2.0
MERGED = "merged.events.jsonl"


def node_dirs(run_path: Path) -> list[Path]:
    """The other nodes' run directories of a multi-node run, by name (none for a one-node run)."""
    try:
        return sorted(p for p in (run_path / NODES).iterdir() if (p / "events.jsonl").is_file())
    except OSError:
        return []


def clock_offset(folder: Path) -> float:
    """The shared filesystem's clock minus this host's, in seconds: the mtime the file server gives a file
    written now, against this host's time around the write."""
    probe = folder / f".clock.{os.getpid()}"
    try:
        before = time.time()
        probe.write_bytes(b"")
        after = time.time()
        stamp = probe.stat().st_mtime
    except OSError:
        return 0.0
    finally:
        probe.unlink(missing_ok=True)
    return stamp - (before + after) / 2


@dataclass
class _Node:
    """One other node's log, read incrementally."""

    name: str
    tail: LogTail
    index: int = 0
    shift: float = 0.0
    offset: float | None = None

    def translate(self, found: list[events.AnyEvent], main_offset: float) -> list[events.AnyEvent]:
        out: list[events.AnyEvent] = []
        for e in found:
            if isinstance(e, events.Header):
                self.index = int(e.slurm.get("SLURM_NODEID", "0") or 0) or self.index
                self.offset = e.clock_offset
                self.shift = e.clock_offset - main_offset
                e = events.Notice(t=e.t, level="info", key="node", message=f"node {self.name} (node id {self.index}) "
                                  f"writes its own log; its clock is {self.shift:+.3f} s from node 0's")
            mapped = self._map(e)
            if mapped is not None:
                out.append(msgspec.structs.replace(mapped, t=mapped.t + self.shift))
        return out

    def _map(self, e: events.AnyEvent) -> events.AnyEvent | None:
        base = self.index * GPU_STRIDE
        if isinstance(e, (events.Step, events.Log, events.Phase, events.Stacks, events.Notice)):
            if isinstance(e, events.Notice) and e.key != "node":
                return msgspec.structs.replace(e, message=f"[{self.name}] {e.message}")
            return e
        if isinstance(e, events.Sample):
            return msgspec.structs.replace(e, gpu=e.gpu + base)
        if isinstance(e, events.GpuInfo):
            return msgspec.structs.replace(e, indices=[i + base for i in (e.indices or range(len(e.names)))],
                                           names=[f"{self.name}: {n}" for n in e.names])
        if isinstance(e, events.Output):
            return msgspec.structs.replace(e, lines=[f"[{self.name}] {line}" for line in e.lines])
        if isinstance(e, events.End):
            level = "error" if e.state == events.FAILED else "info"
            why = f": {e.error.strip().splitlines()[0]}" if e.error.strip() else ""
            return events.Notice(t=e.t, level=level, key="node",
                                 message=f"node {self.name}: its processes ended, {e.state}{why}")
        return None  # its supervisor's states, controls, estimate: node 0 speaks for the run


@dataclass
class MergedTail:
    """Reads a run's log and its other nodes' logs incrementally, as one stream (a LogTail's interface)."""

    run_path: Path
    main: LogTail = field(init=False)
    nodes: dict[str, _Node] = field(default_factory=dict)
    main_offset: float = 0.0
    _looked: float = field(default=-1e9, repr=False)

    def __post_init__(self) -> None:
        self.main = LogTail(self.run_path / "events.jsonl")

    def poll(self, max_bytes: int | None = 64 << 20) -> list[events.AnyEvent]:
        return self._merge(self.main.poll(max_bytes), lambda node: node.tail.poll(max_bytes))

    def finish(self) -> list[events.AnyEvent]:
        return self._merge(self.main.finish(), lambda node: node.tail.poll(None) + node.tail.finish())

    def _merge(self, found: list[events.AnyEvent], read: Callable[[_Node], list[events.AnyEvent]]) -> list[events.AnyEvent]:
        for e in found:
            if isinstance(e, events.Header):
                self.main_offset = e.clock_offset
        self._discover()
        if not self.nodes:
            return found
        merged = list(found)
        for node in self.nodes.values():
            merged += node.translate(read(node), self.main_offset)
        merged.sort(key=lambda e: (not isinstance(e, events.Header), e.t))  # the run's header stays first
        return merged

    def _discover(self) -> None:
        now = time.monotonic()
        if now - self._looked < DISCOVER_S:
            return
        self._looked = now
        for folder in node_dirs(self.run_path):
            if folder.name not in self.nodes:
                self.nodes[folder.name] = _Node(folder.name, LogTail(folder / "events.jsonl"), index=len(self.nodes) + 1)

    @property
    def skipped(self) -> int:
        return self.main.skipped + sum(n.tail.skipped for n in self.nodes.values())

    @property
    def unknown(self) -> int:
        return self.main.unknown + sum(n.tail.unknown for n in self.nodes.values())

    @property
    def malformed(self) -> int:
        return self.main.malformed + sum(n.tail.malformed for n in self.nodes.values())


def merged_log(run_path: Path) -> Path:
    """The log a replay, doctor or report reads: the run's own for a one-node run; for several nodes, their
    merge, written beside them once (`merged.events.jsonl`) and again only when a node's log grew."""
    nodes = node_dirs(run_path)
    main = run_path / "events.jsonl"
    if not nodes:
        return main
    stamp = ",".join(f"{p.parent.name}:{_size(p)}" for p in [main, *(n / "events.jsonl" for n in nodes)])
    target, stamp_file = run_path / MERGED, run_path / f".{MERGED}.stamp"
    try:
        if target.is_file() and stamp_file.read_text() == stamp:
            return target
    except OSError:
        pass
    tail = MergedTail(run_path)
    tail._looked = -1e9
    found = tail.poll(None) + tail.finish()
    try:
        replace_file(target, b"".join(events.encode(e) for e in found))
        replace_file(stamp_file, stamp.encode())
    except OSError:
        return main  # a read-only run directory: node 0's log alone
    return target


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0

