"""What a resumed trainer carries over from its run's earlier lives (a suspend and resume starts a new process)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import msgspec

from loratui import events

BLOCK = 1 << 20
SCAN_LIMIT = 64 << 20
"""How far back from the log's end to look (the step resumed from is among the last lives' steps)."""
_STEP = b'{"kind":"step"'


def tokens_seen_at(log: Path, step: int, rank: int = 0) -> int:
    """The tokens this rank had seen by `step` in an earlier life: its last Step at or before that step, read
    from the log's end backwards; 0 where there is none (a first life, a checkpoint of another run)."""
    try:
        with open(log, "rb") as handle:
            return _scan(handle, step, rank)
    except OSError:
        return 0


def _scan(handle: BinaryIO, step: int, rank: int) -> int:
    for line in _backwards(handle):
        found = _tokens(line, step, rank)
        if found is not None:
            return found
    return 0


def _backwards(handle: BinaryIO) -> Iterator[bytes]:
    """The log's lines from its end, back `SCAN_LIMIT` bytes at most."""
    end = pos = handle.seek(0, os.SEEK_END)
    rest = b""
    while pos > 0 and end - pos < SCAN_LIMIT:
        start = max(0, pos - BLOCK)
        handle.seek(start)
        lines = (handle.read(pos - start) + rest).split(b"\n")
        pos = start
        rest = lines.pop(0) if pos > 0 else b""  # maybe the end of a line that began in the block before
        yield from reversed(lines)


@dataclass(frozen=True)
class Resumed:
    """Where a checkpoint a process resumes from was written, as its run's log says."""

    phase: int
    """Which train() of its process wrote it (a script may train twice: `loratui.phases`), counted from 1."""
    step: int
    """Its step on the run's axis (a later phase's steps are recorded after the earlier ones')."""
    tokens_seen: int
    """Rank 0's tokens seen by then."""


_KINDS = (b'{"kind":"checkpoint"', b'{"kind":"train_begin"', b'{"kind":"state"', _STEP)


def resumed_phase(log: Path, checkpoint: str) -> Resumed | None:
    """The training phase that wrote `checkpoint` (its last Checkpoint event in the log), its step on the run's axis
    and the tokens seen by then; the phase is its process's n-th train(), n the train begins of that life (since its
    `starting` state) up to it. None where the log has no such checkpoint."""
    wanted = os.path.abspath(checkpoint)
    found: events.Checkpoint | None = None
    seen, begins = 0, 0
    try:
        with open(log, "rb") as handle:
            for line in _backwards(handle):
                if not line.startswith(_KINDS):
                    continue
                try:
                    event = msgspec.json.decode(line, type=events.AnyEvent)
                except msgspec.DecodeError:
                    continue  # a torn line
                if found is None:
                    if isinstance(event, events.Checkpoint) and os.path.abspath(event.path) == wanted:
                        found = event
                elif isinstance(event, events.Step) and event.rank == 0 and event.step == found.step and not seen:
                    seen = event.tokens_seen
                elif isinstance(event, events.TrainBegin) and event.pause_mode != "signal":  # the hook's, not
                    begins += 1  # one the supervisor read from the output before the hook spoke
                elif isinstance(event, events.State) and event.state == events.STARTING:
                    break
    except OSError:
        return None
    return Resumed(max(1, begins), found.step, seen) if found is not None else None


def _tokens(line: bytes, step: int, rank: int) -> int | None:
    if not line.startswith(_STEP):
        return None
    try:
        event = msgspec.json.decode(line, type=events.Step)
    except msgspec.DecodeError:
        return None  # a torn line
    return event.tokens_seen if event.rank == rank and event.step <= step else None


def carried_from_checkpoint(checkpoint: str | None, own_log: Path | None, step: int, rank: int, state_seen: int,
                            world_size: int = 1) -> tuple[int, str]:
    """The tokens seen by `step` when the run's own log has none: a NEW run resumed from another run's
    checkpoint (`resume_from_checkpoint` pointing elsewhere). Returns (tokens, what to tell the user):
    - the checkpoint is a loratui run's (runs/ID/checkpoints/[saved/]checkpoint-N): that run's log, counted as
      this one counts (non-padding tokens, this rank's);
    - else the checkpoint's trainer_state.json (`state_seen`: the Trainer's `num_input_tokens_seen`, recorded
      when `include_num_input_tokens_seen` was on; every rank's together, so split over `world_size`);
    - else 0, and the count starts at this resume."""
    if checkpoint and not isinstance(checkpoint, bool):
        for folder in list(Path(checkpoint).parents)[:3]:
            log = folder / "events.jsonl"
            if log.is_file() and (own_log is None or log.resolve() != own_log.resolve()):
                seen = tokens_seen_at(log, step, rank)
                if seen:
                    return seen, (f"tokens seen: {seen:,} carried from run {folder.name}'s log at step {step}, "
                                  "the run whose checkpoint this one resumes")
                break
    if state_seen > 0:
        seen = state_seen // max(1, world_size)
        ranks = f", split over {world_size} ranks" if world_size > 1 else ""
        return seen, (f"tokens seen: {seen:,} carried from the checkpoint's trainer_state.json (num_input_tokens_seen "
                      f"{state_seen:,}{ranks}; the Trainer's count, which may include padding)")
    return 0, (f"tokens seen: counted from this resume at step {step}; the checkpoint records no count (its "
               "trainer_state.json has no num_input_tokens_seen: include_num_input_tokens_seen was off)")


__all__ = ["Resumed", "carried_from_checkpoint", "resumed_phase", "tokens_seen_at"]
