"""The analysis behind BENCHMARKS.md's GPU figures: the H200 raw outputs kept in bench/results (one .tar.xz
per GPU call) give the published figures, and the paired interval behaves on arms whose answer is known."""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RAW = ROOT / "bench" / "results"

spec = importlib.util.spec_from_file_location("gpu_analyse", ROOT / "bench" / "gpu_analyse.py")
assert spec and spec.loader
gpu_analyse = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_analyse)


def _field(text: str, before: str) -> float:
    return float(text.split(before, 1)[1].split()[0].strip(",;"))


def test_kept_h200_outputs_give_the_published_overhead_figures() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_analyse.py"), "overhead",
                           str(RAW / "h200-2026-12-03-call1-overhead.tar.xz"),
                           str(RAW / "h200-2026-12-03-call2-overhead-compile.tar.xz")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    lines = {ln.split()[1]: ln for ln in done.stdout.splitlines() if ln.startswith("OVH_RESULT")}
    headless, tui = lines["b"], lines["c"]
    assert "over 4 vs 4 runs" in headless and "(4 rounds)" in headless
    assert _field(headless, "b/a = ") == 0.9995
    assert _field(headless, "one-sided 95% lower bound ") == 0.9923
    assert _field(tui, "c/a = ") == 0.9862
    assert _field(tui, "one-sided 95% lower bound ") == 0.9585


def _analyse(*args: str) -> str:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_analyse.py"), *args],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_kept_h200_outputs_give_the_published_issue2_and_throughput_figures() -> None:
    issue2 = _analyse("issue2", str(RAW / "h200-2026-12-02-spikes-issue2.tar.xz"))
    for figure in ("recorded_used_peak_GiB=12.05", "smi_used+reserved_peak_GiB=12.06", "smi_used_peak_GiB=11.45",
                   "recorded_minus_smi(used+reserved)_MiB=-1", "torch_peak_reserved_GiB=10.33",
                   "torch_peak_allocated_GiB=10.10", "used_peak-minus-torch_peak_reserved_GiB=1.72",
                   "steady_s_per_step=2.527", "tokens_per_step=432", "sampler_hz=99.4", "samples=769"):
        assert figure in issue2
    rows = {ln.split()[1] + " " + ln.split()[2]: ln
            for ln in _analyse("throughput", str(RAW / "h200-2026-12-02-throughput.tar.xz")).splitlines()
            if ln.startswith("TPUT ") and not ln.startswith("TPUT bf16_rate")}
    published = {"qlora loratui": (6094, 41.2), "qlora-liger loratui": (5662, 38.3),
                 "qlora-liger-2048 loratui": (6981, 47.2), "qlora-fused loratui": (6155, 41.6),
                 "qlora-liger-nogc loratui": (8806, 59.6), "bf16 loratui": (7609, 51.5),
                 "bf16 plain": (7545, 51.0), "bf16-liger loratui": (8109, 54.8)}
    assert set(rows) == set(published)
    for name, (tok_s, mfu) in published.items():
        assert f" tok_per_s={tok_s} mfu_6N={mfu}% " in rows[name], rows[name]
    compiled = _analyse("throughput", str(RAW / "h200-2026-12-03-call2-overhead-compile.tar.xz"))
    assert "TPUT qlora-compile loratui end=finished" in compiled and "tok_per_s=6005 mfu_6N=40.4%" in compiled


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
