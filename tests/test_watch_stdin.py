"""A watched command's standard input is what it would read alone, as `nohup` decides it: a pipe or a file
given to `loratui run` is the command's; a terminal is not (the command outlives it: /dev/null).

The trial piped text into `loratui run -- python probe.py`: the probe read nothing, where alone it read it."""

from __future__ import annotations

import ast
import os
import pty
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

READER = ("import os, sys; open(sys.argv[1], 'w').write(repr((sys.stdin.read(), "
          "os.readlink('/proc/self/fd/0'))))")


def _watch(tmp_path: Path, **stdin: object) -> tuple[str, str]:
    """(what the command read, what its fd 0 is) when `loratui run --headless -- python -c READER` is given
    `stdin` (subprocess.run's `input` or `stdin`)."""
    seen = tmp_path / "seen.txt"
    result = subprocess.run([sys.executable, "-m", "loratui", "run", "--headless", "--runs-dir", str(tmp_path / "runs"),
                             "--", sys.executable, "-c", READER, str(seen)], capture_output=True, timeout=300,
                            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, check=False,
                            **stdin)  # type: ignore[call-overload]
    assert result.returncode == 0, result.stderr[-2000:]
    return ast.literal_eval(seen.read_text())


def test_a_pipe_into_loratui_run_is_the_commands_standard_input(tmp_path: Path) -> None:
    read, fd0 = _watch(tmp_path, input=b"hello\nworld\n")
    assert read == "hello\nworld\n" and fd0.startswith("pipe:"), (read, fd0)


def test_a_file_into_loratui_run_is_the_commands_standard_input(tmp_path: Path) -> None:
    data = tmp_path / "prompts.txt"
    data.write_text("one\ntwo\n")
    with data.open("rb") as given:
        read, fd0 = _watch(tmp_path, stdin=given)
    assert read == "one\ntwo\n" and fd0 == str(data), (read, fd0)


def test_a_terminal_is_not_given_to_the_command(tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    try:
        read, fd0 = _watch(tmp_path, stdin=follower)
    finally:
        os.close(follower)
        os.close(leader)
    assert (read, fd0) == ("", os.devnull)
