"""The event codec and the tolerant log reader."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from loratui import events
from loratui.eventlog import EventWriter, LogTail, read_log


def test_round_trip_keeps_nan_loss() -> None:
    event = events.Log(t=1.0, step=3, values={"loss": events.num_out(math.nan),
                                               "grad_norm": events.num_out(math.inf), "lr": 2e-4})
    back = events.decode_line(events.encode(event))
    assert isinstance(back, events.Log)
    assert math.isnan(events.num_in(back.values["loss"]))  # type: ignore[arg-type]
    assert events.num_in(back.values["grad_norm"]) == math.inf
    assert back.values["lr"] == 2e-4


@pytest.mark.parametrize("line", [b"", b"{", b"not json", b"[1,2]", b'{"kind": 3}', b'{"t": 1}'])
def test_junk_lines_decode_to_none(line: bytes) -> None:
    assert events.decode_line(line) is None


def test_unknown_kind_is_kept_as_unknown() -> None:
    decoded = events.decode_line(b'{"kind": "from_the_future", "t": 5, "x": 1}')
    assert isinstance(decoded, events.Unknown) and decoded.kind == "from_the_future"


def _write(path: Path, n: int) -> None:
    writer = EventWriter(path)
    for i in range(n):
        writer.write(events.Step(t=float(i), step=i, epoch=0.0, step_time=0.1))
    writer.close()


def test_torn_last_line_is_skipped_and_counted(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    _write(log, 5)
    with open(log, "ab") as handle:
        handle.write(b'{"kind":"step","step":5,"ep')  # a writer killed mid-line
    contents = read_log(log)
    assert [e.step for e in contents.events] == [0, 1, 2, 3, 4]  # type: ignore[union-attr]
    assert contents.skipped == 1 and "1 unreadable line skipped" in contents.notes()


def test_tail_waits_for_the_newline(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    _write(log, 2)
    tail = LogTail(log)
    assert len(tail.poll()) == 2
    line = events.encode(events.Step(t=9.0, step=9, epoch=0.0, step_time=0.1))
    with open(log, "ab") as handle:
        handle.write(line[:10])
    assert tail.poll() == []
    with open(log, "ab") as handle:
        handle.write(line[10:])
    assert [e.step for e in tail.poll()] == [9]  # type: ignore[union-attr]
    assert tail.skipped == 0


def test_unknown_kinds_are_counted_not_fatal(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    _write(log, 1)
    with open(log, "ab") as handle:
        handle.write(b'{"kind":"hologram","t":1}\n')
    contents = read_log(log)
    assert len(contents.events) == 1 and contents.unknown == 1
