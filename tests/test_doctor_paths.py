"""`loratui doctor PATH` where PATH is a pipe (`loratui doctor <(kubectl logs pod)`, `/dev/fd/63`) or a device: the
pipe was "no such file, run directory or run id" though it exists, and so was /dev/null."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from loratui.cli import main


def test_a_pipe_is_read_as_it_streams(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pipe = tmp_path / "log.pipe"
    os.mkfifo(pipe)

    def write() -> None:
        with open(pipe, "w") as handle:
            handle.write("{'loss': 2.0, 'grad_norm': 1.0}\n{'loss': nan, 'grad_norm': nan}\n")

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    assert main(["doctor", str(pipe)]) == 1
    writer.join(timeout=10)
    out = capsys.readouterr().out
    assert "nan_loss" in out and "no such file" not in out, out


def test_a_device_is_one_clear_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", os.devnull]) == 2
    err = capsys.readouterr().err
    assert "not a file" in err and "no such file" not in err and "Traceback" not in err, err
