"""The headless replay summary agrees with the log it was built from."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from loratui import events
from loratui.eventlog import read_log
from loratui.logic.runstate import RunState
from loratui.logic.summary import summarize
from loratui.sources.open_any import open_any

ROOT = Path(__file__).parent.parent
GIB = 1 << 30


def _logged(found: list[events.AnyEvent], key: str) -> list[tuple[int, float]]:
    """(step, value) of `key` in the Log events, the end-of-training summary left out."""
    out = []
    for e in found:
        if isinstance(e, events.Log) and key in e.values and "train_runtime" not in e.values:
            out.append((e.step, events.num_in(e.values[key])))
    return out  # type: ignore[return-value]


def _check(summary: dict, found: list[events.AnyEvent]) -> None:
    losses = _logged(found, "loss")
    finite = [v for _, v in losses if math.isfinite(v)]
    steps = [e.step for e in found if isinstance(e, events.Step)]
    end = next(e for e in reversed(found) if isinstance(e, events.End))
    assert summary["steps"] == steps[-1]
    assert summary["first_loss"] == losses[0][1] and summary["last_loss"] == losses[-1][1]
    assert summary["min_loss"] == min(finite)
    assert summary["nan_steps"] == [s for s, v in losses if not math.isfinite(v)]
    assert summary["eval_points"] == [list(p) for p in _logged(found, "eval_loss")]
    assert summary["end_state"] == end.state
    assert summary["duration_s"] == pytest.approx(found[-1].t - found[0].t, abs=1e-3)
    reserved = max((e.peak_reserved or 0 for e in found if isinstance(e, events.Step)), default=0)
    assert summary["peak_torch_reserved_gib"] == (round(reserved / GIB, 3) if reserved else None)
    json.dumps(summary, allow_nan=False)  # strict JSON: no bare NaN


@pytest.mark.slow
def test_summary_of_a_real_tiny_run_matches_its_log(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "loratui", "run", str(ROOT / "recipes" / "tiny.toml"), "--headless",
                           "--max-steps", "30", "--runs-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    found, notes, _ = open_any("tiny", tmp_path)
    summary = summarize(RunState().feed_all(found), notes)
    assert summary["steps"] == 30 and summary["end_state"] == events.FINISHED and summary["skipped"] == ""
    _check(summary, found)


def test_summary_of_an_imported_nan_run() -> None:
    found, notes, _ = open_any(ROOT / "tests" / "data" / "trainer_state" / "v4_30_crlf_nan.json", Path("."))
    summary = summarize(RunState().feed_all(found), notes)
    assert summary["nan_steps"] == [3, 4] and summary["last_loss"] == "NaN" and summary["min_loss"] == 1.81
    assert summary["eval_points"] == [[4, "NaN"]] and summary["peak_device_used_gib"] is None
    assert summary["diagnoses"] == []


def test_summary_says_what_was_skipped(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    found = [events.Header(t=1.0, schema=1, run_id="x", recipe_hash="h"),
             events.Step(t=2.0, step=1, epoch=0.1, step_time=1.0, peak_reserved=3 * GIB),
             events.Log(t=2.0, step=1, values={"loss": 2.0}),
             events.End(t=3.0, state=events.FAILED, error="CUDA out of memory")]
    log.write_bytes(b"".join(events.encode(e) for e in found) + b'{"kind":"st')
    contents = read_log(log)
    summary = summarize(RunState().feed_all(contents.events), contents.notes())
    assert summary["skipped"] == "1 unreadable line skipped" and summary["end_error"] == "CUDA out of memory"
    assert summary["peak_torch_reserved_gib"] == 3.0
    _check(summary, contents.events)


def test_diagnoses_come_from_the_advisor() -> None:
    pytest.importorskip("loratui.logic.advisor")
    from loratui.logic.summary import diagnose

    found, _, _ = open_any(ROOT / "tests" / "data" / "trainer_state" / "v4_30_crlf_nan.json", Path("."))
    assert "nan_loss" in diagnose(found)


def test_a_nan_step_logged_as_zero_is_not_the_minimum_loss() -> None:
    """Issue 24 item 6: transformers logs 'loss': 0.0 (or '0') beside grad_norm nan for NaN steps."""
    found = [events.Log(t=float(i), step=i, values={"loss": loss, "grad_norm": grad}) for i, (loss, grad) in
             enumerate([(1.9, 2.1), (1.7, 1.8), ("0", "NaN"), (0.0, "NaN")], start=1)]
    summary = summarize(RunState().feed_all(found), "")
    assert summary["min_loss"] == 1.7 and summary["nan_steps"] == [3, 4] and summary["last_loss"] == "NaN"
