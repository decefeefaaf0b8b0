"""Key latency in a real terminal: `loratui run recipes/tiny.toml` training live in tmux (120x36,
xterm-256color, a tmux server of its own); each key goes in with `tmux send-keys`, then `capture-pane` is
polled until the key's effect shows (the poll itself adds ~10 ms).

    python bench/key_latency.py [--rounds 5]

Keys, in this order (`p` first: right after an escape a `p` can be read as alt+p): `p` ("pause: sent", the
supervisor's acknowledgement; `r` resumes), `l` (trainer output pane), `t` (loss <-> lr view), `?` (help
page; escape closes it). One line per key, then a RESULT line (ms, min-max). The run is stopped at the end.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# key, what shows once it took effect, the key that undoes it (before the next round, the effect must be gone)
KEYS = [("p", r"pause: sent", "r"), ("l", r"trainer output", "l"), ("t", r"learning rate / grad norm", "t"),
        ("?", r"loratui — keys", "Escape")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is not installed")
    with tempfile.TemporaryDirectory() as tmp:
        sock, runs = str(Path(tmp) / "tmux.sock"), Path(tmp) / "runs"

        def tmux(*a: str) -> str:
            return subprocess.run(["tmux", "-S", sock, *a], check=False, capture_output=True, text=True, timeout=20).stdout

        def until(pattern: str, timeout: float = 30.0, absent: bool = False) -> float:
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < timeout:
                screen = tmux("capture-pane", "-p", "-t", "k")
                if bool(re.search(pattern, screen)) != absent:
                    return time.perf_counter() - t0
            raise SystemExit(f"{pattern!r} {'still' if absent else 'not'} shown after {timeout}s:\n{screen}")

        command = (f"cd {REPO} && TERM=xterm-256color {sys.executable} -m loratui run recipes/tiny.toml "
                   f"--max-steps 3000 --runs-dir {runs}")
        tmux("new-session", "-d", "-s", "k", "-x", "120", "-y", "36", command)
        try:
            until(r"TRAINING", timeout=180)
            until(r"advice")
            figures = {}
            for key, shows, undo in KEYS:
                times = []
                for _ in range(args.rounds):
                    time.sleep(0.5)
                    tmux("send-keys", "-t", "k", key)
                    times.append(1000 * until(shows))
                    tmux("send-keys", "-t", "k", undo)
                    until(shows, absent=True)  # the "sent" notices last 2 s
                figures[key] = (min(times), max(times))
                print(f"key {key!r}: {' '.join(f'{t:.0f}' for t in times)} ms until {shows!r} shows")
            print("RESULT " + " ".join(f"{k}={lo:.0f}-{hi:.0f}ms" for k, (lo, hi) in figures.items()))
        finally:
            subprocess.run([sys.executable, "-m", "loratui", "stop", "--runs-dir", str(runs)], check=False,
                           cwd=REPO, capture_output=True, timeout=120)
            deadline = time.monotonic() + 120  # the run stops at its next step boundary
            while time.monotonic() < deadline and not any(
                    '"kind":"end"' in log.read_text(errors="replace") for log in runs.glob("*/events.jsonl")):
                time.sleep(0.5)
            tmux("kill-server")


if __name__ == "__main__":
    main()
