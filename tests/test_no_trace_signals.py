"""A watched command starts with the SIGINT its caller had (issue 24's no trace): `nohup loratui run -- ... &`, a
shell's background job, ignores Ctrl-C, and so does the command alone; loratui's own handler on the way (the start's
held Ctrl-C) became Python's default across exec, so the watched script answered a SIGINT it would have ignored (the
slow lane's no-trace tests failed when the suite ran as a background job). SIGHUP stays the one intended difference."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

PROBE = "import json, signal; print('SIG', json.dumps({n: str(signal.getsignal(getattr(signal, n))) " \
        "for n in ('SIGINT', 'SIGQUIT', 'SIGTERM')}), flush=True)"


def _ignoring() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGQUIT, signal.SIG_IGN)


def _default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def _seen(out: str) -> dict[str, str]:
    return json.loads(next(line for line in out.splitlines() if line.startswith("SIG "))[4:])


@pytest.mark.parametrize("started", [_ignoring, _default], ids=["background job", "foreground"])
def test_the_watched_command_has_the_callers_sigint(started, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    alone = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60,
                           preexec_fn=started)
    runs = tmp_path / "runs"
    watched = subprocess.run([sys.executable, "-m", "loratui", "run", "--headless", "--runs-dir", str(runs), "--",
                              sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, timeout=120,
                             preexec_fn=started, stdin=subprocess.DEVNULL)
    assert watched.returncode == 0, watched.stdout + watched.stderr
    (run,) = runs.glob("*/")
    assert _seen((run / "trainer.stdout.log").read_text()) == _seen(alone.stdout)
