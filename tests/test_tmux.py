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
        tmux.wait_screen("live", r"TRAINING", r"VRAM|GPU: none \(CPU run\)", "loss", "advice")  # a CPU run: one GPU line
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


def _hostile_run(runs: Path) -> Path:
    """A recorded run whose trainer printed terminal escapes and whose names look like markup."""
    from loratui import events
    from loratui.eventlog import EventWriter

    esc = "\x1b"
    run = runs / "20270101-000000-hostile"
    run.mkdir(parents=True)
    shutil.copy(TINY, run / "recipe.toml")
    log = EventWriter(run / "events.jsonl")
    for event in [
        events.Header(t=1.0, schema=1, run_id=run.name, recipe_hash="h", name="exp [x] a[/b]"),
        events.State(t=1.0, state=events.LOADING),
        events.GpuInfo(t=1.0, available=True, names=["Evil [/] GPU"], totals=[1 << 35], indices=[0]),
        events.Output(t=2.0, stream="stderr", lines=[
            f"{esc}[2J{esc}[Hcleared?", f"{esc}]0;owned title{esc}\\after title",
            f"{esc}]8;;https://evil.example/{esc}\\click me{esc}]8;;{esc}\\", f"{esc}[41mred{esc}[0m plain",
            "ValueError: boom [/]"]),
        events.End(t=3.0, state=events.FAILED, exit_code=1, error=f"{esc}]0;owned title\x07ValueError: boom [/]"),
    ]:
        log.write(event)
    log.close()
    return run


def test_hostile_output_leaves_the_terminal_intact(tmp_path: Path) -> None:
    """Trainer output with ESC[2J, OSC 0 (retitle), OSC 8 (hyperlink), SGR, and names like `a[/b]`: the
    screen keeps every pane, the terminal keeps its title, and the shell is told why the run failed."""
    tmux = Tmux(tmp_path / "tmux.sock")
    run = _hostile_run(tmp_path / "runs")
    env = f"cd {REPO} && TERM=xterm-256color LORATUI_CACHE={os.environ['LORATUI_CACHE']} "
    tmux("new-session", "-d", "-s", "h", "-x", "80", "-y", "24",
         f"{env}{sys.executable} -m loratui attach {run}; sleep 60")
    try:
        title = tmux("display-message", "-p", "-t", "h", "#{pane_title}").strip()
        screen = tmux.wait_screen("h", r"FAILED", r"trainer output", r"cleared\?", r"red plain", r"q quit", timeout=60)
        lines = [line for line in screen.splitlines() if line.strip()]
        assert lines[0].startswith(" exp [x] a[/b] ") and "step 0/?" in lines[1], screen
        assert "VRAM Evil [/] GPU" in screen and "q quit" in lines[-1], screen
        for shown in ("cleared?", "after title", "click me", "red plain"):
            assert shown in screen, (shown, screen)
        assert "owned title" not in screen and "evil.example" not in screen
        assert tmux("display-message", "-p", "-t", "h", "#{pane_title}").strip() == title
        tmux("send-keys", "-t", "h", "q")
        after = tmux.wait_screen("h", r"failed at step 0", timeout=20)
        assert "ValueError: boom [/]" in after and "owned" not in after
    finally:
        tmux("kill-server")
