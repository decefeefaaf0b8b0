"""Issue 24 item 5: a failed run's diagnosis holds the exception's message and nothing printed around it.

tqdm bars, printed log dicts and warnings follow a traceback in real output (stdout's buffer is flushed
after stderr's; the run's stderr tail is read again at its end): none of them continues the message.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from loratui import events
from loratui.logic.advisor import Advisor
from loratui.logic.tracebacks import TraceScanner
from tests.conftest import kinds, loratui, only_run
from tests.test_watch_runs import ENV, SCRIPTS, watch_dir  # noqa: F401 (a fixture)

MESSAGE = "expected scalar type Float but found BFloat16"
TRACE = ["Traceback (most recent call last):", '  File "/home/u/train.py", line 18, in <module>',
         f'    raise RuntimeError("{MESSAGE}")', f"RuntimeError: {MESSAGE}"]
NOISE = ["train:  33%|███▎      | 2/6 [00:00<00:00, 8080.59it/s, loss=3.3333]",
         "{'loss': '2.5', 'grad_norm': '1.5', 'learning_rate': '0.0002', 'epoch': '0.4'}",
         "/home/u/train.py:16: FutureWarning: `torch_dtype` is deprecated! Use `dtype` instead!",
         '  warnings.warn("`torch_dtype` is deprecated!", FutureWarning, stacklevel=1)',
         "2026-12-04 13:41:35,120 - INFO - saving the adapter"]


@pytest.mark.parametrize("noise", NOISE)
def test_output_after_an_exception_is_not_its_message(noise: str) -> None:
    scanner = TraceScanner()
    for line in [*TRACE, noise]:
        scanner.line(line)
    assert scanner.first is not None and scanner.first.message == MESSAGE


def test_a_message_continued_in_prose_is_still_joined() -> None:
    scanner = TraceScanner()
    for line in ["RuntimeError: CUDA error: device-side assert triggered",
                 "CUDA kernel errors might be asynchronously reported at some other API call"]:
        scanner.line(line)
    assert scanner.first is not None and scanner.first.message.endswith("at some other API call")


def test_stdout_after_stderrs_traceback_and_the_end_tail_do_not_glue() -> None:
    """The watched run's order: stderr's traceback, stdout's buffered lines, then the End's stderr tail."""
    adv = Advisor(None).feed_all([
        events.Output(t=1.0, stream="stderr", lines=TRACE),
        events.Output(t=1.1, stream="stdout", lines=["running the last batch of the epoch"]),
        events.End(t=2.0, state=events.FAILED, exit_code=1, error="\n".join([NOISE[0], *TRACE]))])
    top = adv.items()[0]
    assert top.id == "exception" and top.title.startswith(f"The run failed on RuntimeError: {MESSAGE} -> ")
    assert "batch" not in top.title and "it/s" not in top.title


@pytest.mark.slow
def test_a_watched_script_failing_after_bars_dicts_and_warnings(watch_dir: Path) -> None:
    result = loratui("run", "--headless", "--runs-dir", str(watch_dir), "--", sys.executable,
                     str(SCRIPTS / "fails_after_output.py"), timeout=600, env=ENV)
    assert result.returncode == 1, result.stdout
    run = only_run(watch_dir)
    assert kinds(run, "end")[0]["state"] == "failed"
    doctor = loratui("doctor", str(run)).stdout
    summary = json.loads(loratui("replay", str(run), "--headless", "--summary").stdout)
    title = summary["advice"]["title"]
    assert title.startswith(f"The run failed on RuntimeError: {MESSAGE} -> raised in your code"), title
    assert f"  {title}" in doctor.splitlines(), doctor
    assert f"advice: {title}" in result.stdout.splitlines(), result.stdout  # headless, at the end
    replayed = loratui("replay", str(run), "--headless").stdout
    assert f"advice: {title}" in replayed.splitlines(), replayed
    for text in (title, doctor):
        assert "it/s" not in text and "{'loss'" not in text and "Warning" not in text, text
