"""Ctrl-C in `loratui run --headless` on a terminal detaches, and leaves the progress bar once on the screen.

The trial at 80x24: the bar filled the terminal's width, the terminal's echo of Ctrl-C ("^C") wrapped to a
new line, and the bar's last redraw then left a second copy of the bar above the "detached" lines."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.test_tmux import Tmux

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]

LOOP = ("import sys, time\n"
        "for i in range(1, 1001):\n"
        "    print(f'step {i} loss={2 - i / 1000:.4f}', flush=True)\n"
        "    sys.stderr.write(f'\\r  {i // 10:3d}%|#         | {i}/1000 [00:01<03:00,  5.00it/s]')\n"
        "    sys.stderr.flush()\n"
        "    time.sleep(0.2)\n")


def test_ctrl_c_leaves_one_progress_bar_above_the_detach_message(tmp_path: Path, runs_dir: Path) -> None:
    (tmp_path / "loop.py").write_text(LOOP)
    tmux = Tmux(tmp_path / "tmux.sock")
    command = (f"cd {tmp_path} && unset COLUMNS LINES && TERM=xterm-256color PYTHONPATH={REPO} {sys.executable} "
               "-m loratui run --headless "
               f"--runs-dir {runs_dir} -- {sys.executable} loop.py")
    tmux("new-session", "-d", "-s", "bar", "-x", "72", "-y", "24", command + "; sleep 60")
    try:
        tmux.wait_screen("bar", r"training .*loss 1\.9")
        tmux("send-keys", "-t", "bar", "C-c")
        screen = tmux.wait_screen("bar", r"loratui stop \S+-loop\s*$")
        bars = [line for line in screen.splitlines() if line.startswith("training ")]
        assert len(bars) == 1, screen
    finally:
        tmux("kill-server")
