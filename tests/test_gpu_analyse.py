"""The overhead analysis behind BENCHMARKS.md's GPU table (issue 7): the kept H200 raw outputs give the
published figures, and the paired interval behaves on arms whose answer is known."""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RAW = ROOT / "bench" / "results" / "h200-2026-12-03"

spec = importlib.util.spec_from_file_location("gpu_analyse", ROOT / "bench" / "gpu_analyse.py")
assert spec and spec.loader
gpu_analyse = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_analyse)


def _field(text: str, before: str) -> float:
    return float(text.split(before, 1)[1].split()[0].strip(",;"))


def test_kept_h200_outputs_give_the_published_overhead_figures() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_analyse.py"), "overhead",
                           str(RAW / "call1-overhead"), str(RAW / "call2-overhead-compile")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    lines = {ln.split()[1]: ln for ln in done.stdout.splitlines() if ln.startswith("OVH_RESULT")}
    headless, tui = lines["b"], lines["c"]
    assert "over 4 vs 4 runs" in headless and "(4 rounds)" in headless
    assert _field(headless, "b/a = ") == 0.9995
    assert _field(headless, "one-sided 95% lower bound ") == 0.9923
    assert _field(tui, "c/a = ") == 0.9862
    assert _field(tui, "one-sided 95% lower bound ") == 0.9585


def test_paired_interval_on_known_arms() -> None:
    a = {f"x:{i}": 2.6 + 0.03 * (i % 3) for i in range(1, 7)}  # rounds drift; pairing cancels it
    same = gpu_analyse.overhead_result(a, dict(a), "b")
    assert "b/a = 1.0000" in same and "lower bound 1.0000" in same
    slower = {k: v * 1.10 + (0.002 if int(k[2:]) % 2 else -0.002) for k, v in a.items()}
    text = gpu_analyse.overhead_result(a, slower, "c")
    ratio, lo = _field(text, "c/a = "), _field(text, "lower bound ")
    assert math.isclose(ratio, 1 / 1.10, abs_tol=0.002) and lo < ratio < 1.0
    lo95, hi95 = (float(v) for v in text.split("95% CI ")[2].split(",")[0].split("-"))
    assert lo95 < 1 / 1.10 < hi95 and hi95 < 0.95  # a 10 % cost is seen as a cost, not as noise
