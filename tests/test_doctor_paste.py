"""`loratui doctor -` typed on a terminal: it says what it waits for, and one Ctrl-D ends the paste (an empty
one took two: the format probe's read saw the end, the first line's read waited for another)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time

from tests.conftest import REPO

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.32 GiB. GPU 0 has a total capacity of "
       "31.36 GiB of which 1.18 GiB is free.\n")


def _read_until(leader: int, proc: subprocess.Popen[bytes], needle: bytes, timeout: float = 120) -> bytes:
    """The terminal's output until `needle` shows (or the process ends, or the time is up)."""
    seen, deadline = b"", time.monotonic() + timeout
    while needle not in seen and time.monotonic() < deadline:
        if select.select([leader], [], [], 0.2)[0]:
            try:
                seen += os.read(leader, 4096)
            except OSError:
                break
        elif proc.poll() is not None:
            break
    return seen


def _doctor_on_a_terminal(*typed: bytes) -> tuple[bytes, int | None]:
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "loratui", "doctor", "-"], stdin=follower, stdout=follower,
                            stderr=follower, env={**os.environ, "PYTHONPATH": str(REPO)})
    os.close(follower)
    try:
        seen = _read_until(leader, proc, b"Ctrl-D")  # the prompt first: what is typed next goes to the paste
        for text in typed:
            os.write(leader, text)
        seen += _read_until(leader, proc, b"read as training text", timeout=60)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        return seen, proc.poll()
    finally:
        proc.kill()
        proc.wait()
        os.close(leader)


def test_one_ctrl_d_ends_an_empty_paste() -> None:
    """An empty paste is bad input, said as such: it read "no problems found" in nothing, exit 0."""
    seen, code = _doctor_on_a_terminal(b"\x04")
    assert b"paste the log or traceback, then Ctrl-D" in seen
    assert code == 2 and b"standard input: empty, no text to diagnose" in seen, seen
    assert b"no problems found" not in seen and b"Traceback" not in seen


def test_an_empty_or_blank_file_or_pipe_is_bad_input(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "empty.log").write_text("")
    (tmp_path / "blank.log").write_text("\n  \n\n")
    for args, given in ((["empty.log"], b""), (["blank.log"], b""), (["-"], b""), (["-"], b"\n\n")):
        result = subprocess.run([sys.executable, "-m", "loratui", "doctor", *args], input=given, cwd=tmp_path,
                                capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120,
                                check=False)
        assert result.returncode == 2 and result.stdout == b"", (args, result)
        assert result.stderr.count(b"\n") == 1 and b"empty, no text to diagnose" in result.stderr, result.stderr


def test_a_pasted_oom_then_ctrl_d_is_diagnosed() -> None:
    seen, code = _doctor_on_a_terminal(OOM.encode(), b"\x04")
    assert code == 1 and b"ERROR" in seen, seen


def test_a_thread_without_steps_is_not_dated_step_0(tmp_path) -> None:
    """A pasted report with no step numbers read '(step 0)' beside its finding: no step is named at all."""
    from loratui.commands.doctor import diagnose, render

    text = tmp_path / "flat.txt"
    text.write_text("I fine-tune llama-2-7b with LoRA. The training loss stays at 2.3 for 2000 steps and never "
                    "goes down.\n")
    items, note = diagnose(text)
    assert [i.id for i in items] == ["loss_flat"]
    shown = render(items, text, note)
    assert "loss_flat" in shown and "(step" not in shown
