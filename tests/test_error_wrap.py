"""A CLI error on a terminal is wrapped at its width, at spaces (a path or `file:line:key` stays whole), with
its words unchanged; piped, it stays one line to grep."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

from tests.conftest import REPO

BAD = '[model]\npath = "x"\n[training]\nlearnin_rate = 1\n'


def _on_terminal(args: list[str], columns: int, cwd: Path) -> str:
    """What `loratui ARGS` writes to a terminal `columns` wide (standard error and output both)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "loratui", *args], stdin=subprocess.DEVNULL, stdout=follower,
                            stderr=follower, cwd=cwd, env={**os.environ, "PYTHONPATH": str(REPO)})
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=120)
    os.close(leader)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def _piped(args: list[str], cwd: Path) -> str:
    return subprocess.run([sys.executable, "-m", "loratui", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120).stderr


def test_a_recipe_error_fits_an_80_column_terminal_word_for_word(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text(BAD)
    args = ["estimate", "bad.toml"]
    whole = _piped(args, tmp_path).rstrip("\n")
    assert whole.count("\n") == 0 and len(whole) > 80  # one long line: the case at hand
    shown = _on_terminal(args, 80, tmp_path).rstrip("\n")
    lines = shown.split("\n")
    assert len(lines) > 1 and all(len(line) < 80 for line in lines), shown
    assert lines[0].startswith("loratui: bad.toml:4: unknown key `training.learnin_rate`")  # where: whole, first
    assert all(line.startswith("  ") for line in lines[1:])  # continuation lines read as one message
    assert " ".join(line.strip() for line in lines) == whole  # not a word changed, none cut


def test_a_path_longer_than_the_line_stays_whole_after_its_prefix(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 90)
    deep.mkdir()
    (deep / "bad.toml").write_text(BAD)
    args = ["estimate", str(deep / "bad.toml")]
    lines = _on_terminal(args, 80, tmp_path).rstrip("\n").split("\n")
    assert lines[0] == f"loratui: {deep / 'bad.toml'}:4:"  # too long for any line: kept whole, with its prefix
    assert " ".join(line.strip() for line in lines) == _piped(args, tmp_path).rstrip("\n")


def test_a_wide_terminal_keeps_a_short_error_on_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text(BAD)
    args = ["estimate", str(tmp_path / "bad.toml")]
    whole = _piped(args, tmp_path).rstrip("\n")
    assert _on_terminal(args, 400, tmp_path).rstrip("\n") == whole


def test_recipes_fits_an_80_column_terminal_with_every_card_word_for_word(tmp_path: Path) -> None:
    """At 80 columns the card column had 8 columns left: the terminal cut "a 32 GB card (" from "18.2 GiB"
    back at column 0, under NAME. Each card now reads whole on lines of its own; piped, one row a line."""
    piped = subprocess.run([sys.executable, "-m", "loratui", "recipes"], check=True, capture_output=True, text=True,
                           cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120).stdout
    cards = [line.split("  ")[-1].strip() for line in piped.splitlines()[1:5]]
    assert all(len(line) > 80 for line in piped.splitlines()[1:5])  # the case at hand
    shown = _on_terminal(["recipes"], 80, tmp_path)
    assert all(len(line) < 80 for line in shown.splitlines()), shown
    text = " ".join(shown.split())
    assert all(f"fits {card}" in text for card in cards), shown
    assert [line.split()[0] for line in shown.splitlines()[1:9:2]] == ["llama13b-qlora", "qwen32b-qlora",
                                                                       "qwen7b", "tiny"]


def test_replay_headless_lines_fit_an_80_column_terminal(tmp_path: Path) -> None:
    """`replay --headless` on a terminal: a progress line of 95+ columns broke "VRAM 19.1/21.3" in two at 80.
    The bar shrinks or goes and the figures fold whole so that each line fits; piped, each stays one line."""
    from tests import scenarios
    from tests.test_replay_cli import _end, _recorded

    path = _recorded(tmp_path, "r", scenarios.run(30, max_steps=30) + [_end(30)])
    piped = subprocess.run([sys.executable, "-m", "loratui", "replay", str(path), "--headless"], check=True,
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
                           timeout=120).stdout.splitlines()[:-1]
    assert max(map(len, piped)) > 80 and "[" + "-" * 24 + "]" in piped[0]  # the case at hand: one line each
    shown = _on_terminal(["replay", str(path), "--headless"], 80, tmp_path)
    assert all(len(line) < 80 for line in shown.splitlines()), shown
    records = shown.replace("\n  ", "  ").splitlines()  # a folded line's continuation is indented
    assert len(records) == len(piped) + 1, shown
    for full, fitted in zip(piped, records):  # the same figures, each whole
        assert " ".join(full.split("] ")[1].split()) in " ".join(fitted.split()), (full, fitted)
