"""Two writers of one log (issue 25 item 15): a writer SIGKILLed mid-write never swallows the other's
next event. Real processes, real kills: one writer appends numbered notices while another, forked again
and again, writes 800 KB events and is killed as its log grows (so most kills land inside a write)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

from loratui import eventlog, events
from loratui.eventlog import EventWriter
from tests.conftest import REPO

KILLED = r'''
import os, signal, sys
from pathlib import Path
from loratui import events
from loratui.eventlog import EventWriter
path, kills = Path(sys.argv[1]), int(sys.argv[2])
event = events.Output(t=1.0, stream="stdout", lines=["x" * 4000] * 200)
for _ in range(kills):
    start = os.stat(path).st_size
    pid = os.fork()
    if pid == 0:
        writer = EventWriter(path)
        while True:
            writer.write(event)
    while os.stat(path).st_size < start + 2_000_000:  # it is writing: kill it now, likely mid-event
        pass
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
'''
NUMBERED = r'''
import sys
from pathlib import Path
from loratui import events
from loratui.eventlog import EventWriter
writer, stop, n = EventWriter(Path(sys.argv[1])), Path(sys.argv[2]), 0
while not stop.exists():
    n += writer.write(events.Notice(t=1.0, level="info", message=str(n), key="seq"))
print(n)
'''
KILLS = 60


def test_a_killed_writer_never_swallows_the_other_writers_events(tmp_path: Path) -> None:
    log, stop = tmp_path / "events.jsonl", tmp_path / "stop"
    log.touch()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    numbered = subprocess.Popen([sys.executable, "-c", NUMBERED, str(log), str(stop)], stdout=subprocess.PIPE,
                                text=True, env=env)
    try:
        subprocess.run([sys.executable, "-c", KILLED, str(log), str(KILLS)], env=env, check=True, timeout=300)
    finally:
        stop.touch()
        written = int(numbered.communicate(timeout=120)[0])
    contents = eventlog.read_log(log)
    found = [int(e.message) for e in contents.events if isinstance(e, events.Notice) and e.key == "seq"]
    print(f"{KILLS} kills, {contents.skipped} torn lines, {written} numbered events written, {len(found)} read")
    assert contents.skipped > 0  # the kills did tear lines: the test exercised what it claims
    assert found == list(range(written))


def test_a_stopped_lock_holder_delays_a_writer_but_never_stops_it(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A writer frozen (SIGSTOP) while holding the lock: the others write unlocked after LOCK_WAIT."""
    monkeypatch.setattr(eventlog, "LOCK_WAIT", 0.2)
    log = tmp_path / "events.jsonl"
    writer = EventWriter(log)
    with open(log, "ab") as holder:
        fcntl.flock(holder.fileno(), fcntl.LOCK_EX)
        began = time.monotonic()
        assert writer.write(events.Notice(t=1.0, level="info", message="late", key="k"))
        assert time.monotonic() - began >= 0.2
    writer.close()
    assert [e.message for e in eventlog.read_log(log).events] == ["late"]  # type: ignore[attr-defined]
