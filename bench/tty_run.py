"""Run `loratui run` with its TUI attached to a real pseudo-terminal, as a user over SSH would (issue 7 (c)).

    python bench/tty_run.py --cols 200 --rows 60 --runs-dir D --out STATS.json -- python -m loratui run ...

The viewer draws into a pty of the given size; this process drains it (counting bytes, as a terminal
would read them) until the run in D records its `end` event, then presses `q` once the viewer shows the run
over (quit; no question then) and reports the viewer's CPU seconds (from wait4's rusage) per wall second and bytes per second written to the terminal.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import select
import struct
import sys
import termios
import time
from pathlib import Path


def run_ended(runs_dir: Path, before: set[Path]) -> bool:
    """Whether a run started after `before` was listed has recorded its end (earlier runs don't count)."""
    for log in runs_dir.glob("*/events.jsonl"):
        if log.parent in before:
            continue
        with log.open("rb") as fh:
            fh.seek(max(0, log.stat().st_size - 4096))
            if b'"kind":"end"' in fh.read():
                return True
    return False


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--cols", type=int, default=200)
    p.add_argument("--rows", type=int, default=60)
    p.add_argument("--runs-dir", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    before = set(a.runs_dir.glob("*/"))
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm-256color"
        os.execvp(cmd[0], cmd)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", a.rows, a.cols, 0, 0))
    t0 = time.monotonic()
    nbytes, ended_at, detached_at, status, usage = 0, None, None, None, None
    tail = b""  # the last bytes the viewer drew, kept for a post-mortem when it fails
    last_check = last_q = 0.0
    while True:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the viewer closed the terminal
                chunk = b""
            if not chunk:
                break
            if ended_at is None:
                nbytes += len(chunk)
            tail = (tail + chunk)[-32768:]
        now = time.monotonic()
        if ended_at is None and now - last_check > 1.0:
            last_check = now
            if run_ended(a.runs_dir, before):
                ended_at = now
        # q quits without asking once the viewer shows the run over; before that it asks (a busy machine
        # can fold the end event seconds after the log has it): wait for the final state on screen.
        shown_over = any(word in tail for word in (b"FINISHED", b"FAILED", b"STOPPED"))
        if ended_at is not None and detached_at is None and (shown_over or now - ended_at > 20):
            os.write(fd, b"q")
            detached_at = last_q = now
        elif detached_at is not None and now - last_q > 5:  # still there: close a question, ask again
            os.write(fd, b"\x1b")
            time.sleep(0.3)
            os.write(fd, b"q")
            last_q = now
        if now - t0 > a.timeout or (detached_at is not None and now - detached_at > 30):
            os.kill(pid, 9)
            break
    _, status, usage = os.wait4(pid, 0)
    wall = (ended_at or time.monotonic()) - t0
    cpu = usage.ru_utime + usage.ru_stime
    result = {"cols": a.cols, "rows": a.rows, "wall_s": round(wall, 1), "viewer_cpu_s": round(cpu, 2),
              "viewer_cpu_share": round(cpu / wall, 4) if wall else None,
              "bytes_per_s": round(nbytes / wall) if wall else None, "exit_status": status,
              "run_ended": ended_at is not None}
    a.out.write_text(json.dumps(result))
    a.out.with_suffix(".screen").write_bytes(tail)
    print("TTY " + json.dumps(result))
    return 0 if ended_at is not None else 1


if __name__ == "__main__":
    sys.exit(main())
