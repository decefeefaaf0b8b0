"""As a user would: the real app in tmux on a real tiny run; keys, SIGKILL of the viewer, attach."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, TINY, kinds, only_run, wait_for

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]


class Tmux:
    """One tmux server of our own (its own socket), so the test never touches the user's sessions."""

    def __init__(self, socket: Path) -> None:
        self.socket = str(socket)

    def __call__(self, *args: str) -> str:
        out = subprocess.run(["tmux", "-S", self.socket, *args], capture_output=True, text=True, timeout=20)
        return out.stdout

    def screen(self, target: str) -> str:
        return self("capture-pane", "-p", "-t", target)

    def wait_screen(self, target: str, *patterns: str, timeout: float = 120) -> str:
        """The first screen on which every pattern shows. One frame can show the header's new state
        while the footer's key hints follow on the next, so checks of several parts wait for all."""
        def shown() -> str | None:
            screen = self.screen(target)
            return screen if all(re.search(p, screen) for p in patterns) else None
        try:
            found = wait_for(shown, timeout=timeout, every=0.3)
        except AssertionError:
            raise AssertionError(f"{patterns} not all shown within {timeout}s; last screen:\n"
                                 f"{self.screen(target)}") from None
        assert isinstance(found, str)
        return found


def _viewer_pid(tmux: Tmux, target: str) -> int:
    shell = int(tmux("display-message", "-p", "-t", target, "#{pane_pid}").strip())
    out = subprocess.run(["pgrep", "-P", str(shell)], capture_output=True, text=True).stdout.split()
    return int(out[0]) if out else shell


def test_live_keys_kill_viewer_and_attach(tmp_path: Path, runs_dir: Path) -> None:
    tmux = Tmux(tmp_path / "tmux.sock")
    env = f"cd {REPO} && TERM=xterm-256color LORATUI_CACHE={os.environ['LORATUI_CACHE']} "
    command = f"{env}{sys.executable} -m loratui run {TINY} --max-steps 3000 --runs-dir {runs_dir}"
    tmux("new-session", "-d", "-s", "live", "-x", "80", "-y", "24", command + "; sleep 60")
    try:
        tmux.wait_screen("live", r"TRAINING", "VRAM", "loss", "advice")
        tmux("send-keys", "-t", "live", "p")
        tmux.wait_screen("live", r"PAUSED", "r resume", timeout=30)
        tmux("send-keys", "-t", "live", "r")
        tmux.wait_screen("live", r"TRAINING", timeout=30)
        run = only_run(runs_dir)
        os.kill(_viewer_pid(tmux, "live"), signal.SIGKILL)  # the viewer dies (as with a dropped SSH link)
        seen = len(kinds(run, "step"))
        wait_for(lambda: len(kinds(run, "step")) > seen + 5, timeout=60)  # training goes on

        tmux("new-session", "-d", "-s", "attach", "-x", "160", "-y", "48",
             f"{env}{sys.executable} -m loratui attach --runs-dir {runs_dir}; sleep 60")
        screen = tmux.wait_screen("attach", r"step (\d+)/3000")
        shown = int(re.search(r"step (\d+)/3000", screen).group(1))  # type: ignore[union-attr]
        assert shown >= seen
        steps = [e["step"] for e in kinds(run, "step")]
        assert steps == list(range(1, len(steps) + 1))  # no gap in the recorded history
        tmux("send-keys", "-t", "attach", "x")
        tmux.wait_screen("attach", r"Stop the run", timeout=10)
        tmux("send-keys", "-t", "attach", "y")
        wait_for(lambda: kinds(run, "end"), timeout=60)
        assert kinds(run, "end")[0]["state"] == "stopped"
    finally:
        tmux("kill-server")
