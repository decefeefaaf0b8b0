"""Untrusted text is inert before it is shown (loratui.text), and a failure's reason comes first
(loratui.tui.failure), in the app, headless progress and doctor alike."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from loratui import events
from loratui.logic.advisor.advice import Advice
from loratui.rundir import RunDir
from loratui.text import inert, inert_lines
from loratui.tui import failure
from tests.conftest import write_run

ESC = "\x1b"
HOSTILE = [
    f"{ESC}[2J{ESC}[Hwiped",  # clear the screen, cursor home
    f"{ESC}]0;owned title\x07after title",  # OSC 0: retitle the terminal (BEL-terminated)
    f"{ESC}]8;;https://evil.example/{ESC}\\click me{ESC}]8;;{ESC}\\",  # OSC 8 hyperlink (ST-terminated)
    f"{ESC}[31mred{ESC}[0m rest",  # SGR colour and reset
    "\x9b2Jc1 csi",  # the 8-bit CSI
    f"{ESC}Pdcs payload{ESC}\\dcs",  # DCS string
]


def _no_controls(text: str) -> bool:
    return not any(ord(ch) < 0x20 and ch not in "\n\t" or 0x7F <= ord(ch) <= 0x9F for ch in text)


@pytest.mark.parametrize("raw, shown", [
    (HOSTILE[0], "wiped"), (HOSTILE[1], "after title"), (HOSTILE[2], "click me"), (HOSTILE[3], "red rest"),
    (HOSTILE[4], "c1 csi"), (HOSTILE[5], "dcs"),
])
def test_escape_sequences_are_dropped_whole(raw: str, shown: str) -> None:
    assert inert(raw) == shown


@pytest.mark.parametrize("raw, shown", [
    (f"bare {ESC}", "bare ␛"), (f"{ESC}\nnext", "␛\nnext"), ("over\rwrite", "over␍write"), ("back\bspace", "back␈space"),
    ("bell\x07", "bell␇"), ("nul\x00", "nul␀"), ("del\x7f", "del␡"), ("c1 \x85 nel", "c1 <85> nel"),
    (f"{ESC}]0;no terminator", "0;no terminator"),  # what an unfinished title would have said stays visible
])
def test_other_controls_are_shown_not_obeyed(raw: str, shown: str) -> None:
    assert inert(raw) == shown


def test_ordinary_text_is_unchanged() -> None:
    text = "loss 1.23 · 7B [x] a[/b] ünïcode ━ →\tTab\nsecond line"
    assert inert(text) == text
    assert inert("windows line\r\n") == "windows line\n" and inert("last\r") == "last"
    assert inert("two\nlines", newlines=False) == "two⏎lines"
    assert inert_lines(["a\nb", f"{ESC}[1mbold"]) == ["a⏎b", "bold"]
    assert all(_no_controls(inert(raw)) for raw in HOSTILE)


SIGKILL_ERROR = "\n".join([
    "the trainer was killed by SIGKILL",
    *[f"/venv/lib/python3.11/site-packages/transformers/x{i}.py:12: FutureWarning: `x{i}` is deprecated"
      f"\n  warnings.warn(" for i in range(20)],
])


def test_a_signal_leads_the_failure_tail_and_warnings_are_left_out() -> None:
    end = events.End(t=1.0, state=events.FAILED, exit_code=-9, signal="SIGKILL", error=SIGKILL_ERROR)
    assert failure.reason(end) == "the trainer was killed by SIGKILL"
    tail = failure.tail(end, 15)
    assert tail[0] == "the trainer was killed by SIGKILL"
    assert not any("Warning" in line or "warnings.warn" in line for line in tail)


def test_the_exception_line_is_the_reason_not_the_warning_after_it() -> None:
    error = "\n".join(["Traceback (most recent call last):", '  File "x.py", line 1', "ValueError: bad target",
                       "/venv/torch/cuda.py:5: UserWarning: late warning", "  warnings.warn(",
                       f"{ESC}[2J"])
    end = events.End(t=1.0, state=events.FAILED, exit_code=1, error=error)
    assert failure.reason(end) == "ValueError: bad target"
    assert all(_no_controls(line) for line in failure.tail(end))
    assert failure.reason(events.End(t=1.0, state=events.FINISHED)) == ""
    assert failure.reason(events.End(t=1.0, state=events.FAILED, exit_code=-9, signal="SIGKILL")) == (
        "the trainer was killed by SIGKILL")


def _write_log(path: Path, found: list[events.AnyEvent]) -> RunDir:
    return write_run(path, found)  # type: ignore[no-any-return]


def test_headless_prints_inert_notices_and_the_signal_first(tmp_path: Path) -> None:
    from loratui.tui.headless import follow

    run = _write_log(tmp_path / "run", [
        events.Header(t=1.0, schema=1, run_id="r1", recipe_hash="h", name="r1"),
        events.Notice(t=2.0, level="info", key="estimate",
                      message=f"estimate at the longest example (64 tokens): 1.9 GiB{ESC}]0;owned\x07"),
        events.End(t=3.0, state=events.FAILED, exit_code=-9, signal="SIGKILL", error=SIGKILL_ERROR),
    ])
    out = io.StringIO()
    follow(run, out=out, poll_s=0.0)
    printed = out.getvalue()
    assert "notice: estimate at the longest example" in printed and "estimate: estimate" not in printed
    assert "the trainer was killed by SIGKILL" in printed and "FutureWarning" not in printed
    assert ESC not in printed and "\x07" not in printed


def test_doctor_output_is_inert() -> None:
    from loratui.commands.doctor import render

    item = Advice(id="cuda_error", severity="error", title="CUDA error", step=3, change={},
                  evidence=[f"log line 7: {ESC}[2J{ESC}]8;;http://x{ESC}\\device-side assert"])
    shown = render([item], Path("pasted.log"), "a log")
    assert "device-side assert" in shown and ESC not in shown
