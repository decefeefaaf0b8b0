"""Figures from bench/gpu_suite.sh's raw outputs: one compact summary line per result.

    python bench/gpu_analyse.py issue2 OUT | RUN_DIR SMI_CSV  (OUT: runs/ and smi.csv)
    python bench/gpu_analyse.py spikes OUT | RUN_DIR SPIKES_JSON SMI1S_CSV CPU_JSON  (OUT: runs_tiny/, spikes.json, ...)
    python bench/gpu_analyse.py overhead OUT...  (overhead/a*.json of plain_trainer.py; runs_ovh/, runs_ovh_tty/ of loratui)
    python bench/gpu_analyse.py throughput OUT  (tput/*/ runs and tput/plain_*.json; bf16_rate.txt; the CKPT line of
                                                 logs/ckpt.log or summary.txt)

OUT is the suite's output directory or an archive of one (.tar.xz, .tgz: bench/results keeps one per call),
unpacked into a temporary directory named after it. Reads events.jsonl as plain JSON lines (a torn line is
skipped), so it needs no loratui import.
SMI CSVs are `timestamp, memory.used[, memory.reserved]` in MiB (nvidia-smi --format=csv,noheader,nounits).
"""

from __future__ import annotations

import atexit
import itertools
import json
import math
import random
import shutil
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

GIB = 2**30
ARCHIVES = (".tar.xz", ".txz", ".tar.gz", ".tgz", ".tar")


def unpacked(path: Path) -> Path:
    """OUT itself, or for an archive of OUT a temporary directory (removed at exit) holding its files, named
    like the archive so run labels read the same. Member times are kept: runs sort by them."""
    if not (path.is_file() and path.name.endswith(ARCHIVES)):
        return path
    root = Path(tempfile.mkdtemp(prefix="gpu_analyse-"))
    atexit.register(shutil.rmtree, root, True)
    out = root / next(path.name[: -len(ext)] for ext in ARCHIVES if path.name.endswith(ext))
    with tarfile.open(path) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(out, filter="data")
        else:  # Python < 3.11.4 / 3.12 without extraction filters
            tar.extractall(out)
    return out


def events(run_dir: Path) -> list[dict]:
    out = []
    for line in (run_dir / "events.jsonl").read_bytes().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def find_run(path: Path) -> Path:
    """A run directory, or the only/newest run under a runs directory."""
    if (path / "events.jsonl").exists():
        return path
    runs = sorted(p for p in path.iterdir() if (p / "events.jsonl").exists()) if path.is_dir() else []
    if not runs:
        raise SystemExit(f"no run under {path}")
    return runs[-1]


def smi_rows(path: Path) -> list[tuple[float, float, float | None]]:
    """(wall time, used MiB, reserved MiB or None) per nvidia-smi line."""
    rows = []
    if not path.exists():
        return rows
    for line in path.read_text(errors="replace").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 2:
            continue
        try:
            stamp = parts[0]
            frac = 0.0
            if "." in stamp:
                stamp, ms = stamp.rsplit(".", 1)
                frac = float("0." + ms)
            t = time.mktime(time.strptime(stamp, "%Y/%m/%d %H:%M:%S")) + frac
            used = float(parts[1])
            reserved = float(parts[2]) if len(parts) > 2 and parts[2].replace(".", "").isdigit() else None
        except ValueError:
            continue
        rows.append((t, used, reserved))
    return rows


def steady(times: list[float], skip: int = 2) -> list[float]:
    """Steps after warm-up (the first two carry cuBLAS/autotune warm-up and allocator growth). Step 7
    ran ~12% slower in every run of both arms (a data effect, not the monitor's), so it stays in."""
    return times[skip:] if len(times) > skip else []


def g(x: float | None) -> str:
    return "n/a" if x is None else f"{x / GIB:.2f}"


def issue2(run_dir: Path, smi_csv: Path) -> None:
    run_dir = find_run(run_dir)
    ev = events(run_dir)
    samples = [e for e in ev if e.get("kind") == "sample"]
    steps = [e for e in ev if e.get("kind") == "step"]
    end = next((e for e in ev if e.get("kind") == "end"), {})
    stats = [e for e in ev if e.get("kind") == "sampler_stats"]
    begin = next((e for e in ev if e.get("kind") == "train_begin"), {})
    rec_peak = max((s["used_max"] for s in samples), default=None)
    rec_idle = min((s["used_min"] for s in samples), default=None)
    smi = smi_rows(smi_csv)
    smi_used = max((u for _, u, _ in smi), default=None)
    smi_sum = max((u + r for _, u, r in smi if r is not None), default=None)
    pr = max((s.get("peak_reserved") or 0 for s in steps), default=None)
    pa = max((s.get("peak_allocated") or 0 for s in steps), default=None)
    times = [s["step_time"] for s in steps]
    st = steady(times)
    toks = [s.get("tokens", 0) for s in steps][2:]
    tok_s = sum(toks) / sum(st) if st else None
    peak_step = None
    if samples and rec_peak is not None:
        t_peak = next(s["t"] for s in samples if s["used_max"] == rec_peak)
        peak_step = sum(1 for s in steps if s["t"] < t_peak) + 1
    diff = "n/a"
    if rec_peak is not None and smi_sum is not None:
        diff = f"{rec_peak / 2**20 - smi_sum:.0f}"
    smi_u = g(smi_used * 2**20) if smi_used is not None else "n/a"
    smi_s = g(smi_sum * 2**20) if smi_sum is not None else "n/a"
    print(f"ISSUE2 run={run_dir.name} end={end.get('state')} exit_code={end.get('exit_code')} "
          f"steps={len(steps)} max_length={begin.get('max_length')} "
          f"recorded_used_peak_GiB={g(rec_peak)} (idle {g(rec_idle)}; during step ~{peak_step}) "
          f"smi_used_peak_GiB={smi_u} smi_used+reserved_peak_GiB={smi_s} "
          f"recorded_minus_smi(used+reserved)_MiB={diff} smi_lines={len(smi)}")
    print(f"ISSUE2b torch_peak_reserved_GiB={g(pr)} torch_peak_allocated_GiB={g(pa)} "
          f"used_peak-minus-torch_peak_reserved_GiB={g(rec_peak - pr) if rec_peak and pr else 'n/a'} "
          f"steady_s_per_step={statistics.median(st) if st else float('nan'):.3f} "
          f"steady_tok_per_s={tok_s if tok_s else float('nan'):.0f} "
          f"tokens_per_step={statistics.median(toks) if toks else 0:.0f} "
          f"sampler_hz={stats[-1]['achieved_hz'] if stats else float('nan'):.1f} "
          f"sampler_thread_cpu={100 * stats[-1]['cpu_share'] if stats else float('nan'):.2f}% "
          f"samples={len(samples)} reads_per_window={statistics.mean(s.get('n', 1) for s in samples) if samples else 0:.1f}")


def spikes(run_dir: Path, spikes_json: Path, smi_csv: Path, cpu_json: Path, window: float = 0.1) -> None:
    run_dir = find_run(run_dir)
    ev = events(run_dir)
    samples = sorted((e for e in ev if e.get("kind") == "sample"), key=lambda e: e["t"])
    spk = json.loads(spikes_json.read_text())
    gib = spk["gib"]
    lst = spk["spikes"]
    lo, hi = lst[0]["alloc0"] - 1.0, lst[-1]["free"] + 1.0
    phase = [s for s in samples if lo <= s["t"] <= hi]
    if not phase:
        print("SPIKES no sample events during the spike phase")
        return
    base = statistics.median(s["used_last"] for s in phase)
    thr = base + 3.5 * GIB
    smi = [r for r in smi_rows(smi_csv) if lo <= r[0] <= hi]
    smi_base = statistics.median(u for _, u, _ in smi) if smi else None
    smi_thr = smi_base + 3.5 * 1024 if smi_base is not None else None
    by_ms: dict[int, list[tuple[bool, bool]]] = {}
    matched_windows: set[int] = set()
    matched_smi: set[int] = set()
    slack = 0.005
    for sp in lst:
        a, f = sp["alloc0"], sp["free"]
        hits = [i for i, s in enumerate(phase)
                if s["t"] - window - slack < f and s["t"] + slack > a and s["used_max"] >= thr]
        matched_windows.update(hits)
        smi_hits = [i for i, r in enumerate(smi) if smi_thr is not None and a - 0.05 <= r[0] <= f + 0.05
                    and r[1] >= smi_thr]
        matched_smi.update(smi_hits)
        by_ms.setdefault(sp["ms"], []).append((bool(hits), bool(smi_hits)))
    false_rec = sum(1 for i, s in enumerate(phase) if s["used_max"] >= thr and i not in matched_windows)
    false_smi = sum(1 for i, r in enumerate(smi) if smi_thr is not None and r[1] >= smi_thr
                    and i not in matched_smi)
    held = {ms: statistics.median(s["held_ms"] for s in lst if s["ms"] == ms) for ms in by_ms}
    for ms in sorted(by_ms):
        r = by_ms[ms]
        print(f"SPIKES {ms}ms (held median {held[ms]:.1f} ms) recorded_100Hz/10Hz-windows="
              f"{sum(x for x, _ in r)}/{len(r)} nvidia-smi_1s={sum(y for _, y in r)}/{len(r)}")
    # Amplitude seen: how much of the 4 GiB the caught windows show.
    amp = [s["used_max"] - base for i, s in enumerate(phase) if i in matched_windows]
    gaps = [b["t"] - a["t"] for a, b in itertools.pairwise(phase)]
    print(f"SPIKES_INFO size_GiB={gib} baseline_used_GiB={base / GIB:.2f} threshold=+3.5GiB "
          f"caught_amplitude_median_GiB={statistics.median(amp) / GIB if amp else float('nan'):.2f} "
          f"unmatched_windows_over_threshold={false_rec} smi_lines={len(smi)} unmatched_smi_over={false_smi} "
          f"windows={len(phase)} window_gap_median_ms={1000 * statistics.median(gaps):.1f} "
          f"window_gap_max_ms={1000 * max(gaps):.1f} reads_per_window_mean="
          f"{statistics.mean(s.get('n', 1) for s in phase):.1f} min={min(s.get('n', 1) for s in phase)}")
    stats = [e for e in ev if e.get("kind") == "sampler_stats"]
    cpu = json.loads(cpu_json.read_text()) if cpu_json.exists() else {}
    share = None
    if cpu.get("t1") and cpu.get("t0"):
        share = (cpu["cpu1"] - cpu["cpu0"]) / (cpu["t1"] - cpu["t0"])
    print(f"SUPERVISOR proc_cpu_share={100 * share if share is not None else float('nan'):.2f}%_of_one_core "
          f"over {cpu.get('t1', 0) - cpu.get('t0', 0):.1f}s (utime+stime of the whole supervisor process) "
          f"sampler_thread_cpu_share=" + ",".join(f"{100 * s['cpu_share']:.2f}%" for s in stats)
          + " achieved_hz=" + ",".join(f"{s['achieved_hz']:.1f}" for s in stats)
          + (" notes=" + "|".join(s["note"] for s in stats if s.get("note")) if any(s.get("note") for s in stats) else ""))


def bootstrap_ratio(a: list[float], b: list[float], n: int = 4000) -> tuple[float, float]:
    rng = random.Random(0)
    vals = []
    for _ in range(n):
        ra = statistics.median(rng.choices(a, k=len(a)))
        rb = statistics.median(rng.choices(b, k=len(b)))
        vals.append(ra / rb)
    vals.sort()
    return vals[int(0.025 * n)], vals[int(0.975 * n)]


def run_steps(ev: list[dict]) -> tuple[list[float], dict, int]:
    """(step times, end event, median tokens per step) of a loratui run's events."""
    steps = [e for e in ev if e.get("kind") == "step" and e.get("rank", 0) == 0]
    end = next((e for e in ev if e.get("kind") == "end"), {})
    tok = int(statistics.median(s.get("tokens", 0) for s in steps)) if steps else 0
    return [s["step_time"] for s in steps], end, tok


def loratui_runs(root: Path) -> list[Path]:
    return sorted((p for p in root.iterdir() if (p / "events.jsonl").exists()),
                  key=lambda p: p.stat().st_mtime) if root.exists() else []


# Student's t quantiles (two-sided 95 % = one-sided 97.5 %, and one-sided 95 %) for df 1..30; no scipy
# on the device. Beyond 30 the normal values serve.
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042]
T95 = [6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771, 1.761,
       1.753, 1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701,
       1.699, 1.697]


def t_quantile(df: int, table: list[float], z: float) -> float:
    """Student's t: the table to df 30, then the Cornish-Fisher expansion from the normal quantile `z`
    (within 0.001 from df 30 on)."""
    if 1 <= df <= len(table):
        return table[df - 1]
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def overhead_arms(outs: list[Path]) -> dict[str, dict[str, list[float]]]:
    """Steady step times per arm, keyed by run label "<call dir>:<round>" so rounds pair across arms."""
    arms: dict[str, dict[str, list[float]]] = {"a": {}, "b": {}, "c": {}}
    for out in outs:
        for path in sorted(out.glob("overhead/a*.json"), key=lambda p: int(p.stem[1:])):
            arms["a"][f"{out.name}:{path.stem[1:]}"] = steady(json.loads(path.read_text())["step_times"])
        for arm, root in (("b", out / "runs_ovh"), ("c", out / "runs_ovh_tty")):
            for run in loratui_runs(root):
                name = json.loads((run / "run.json").read_text()).get("name", "") if (run / "run.json").exists() else ""
                t, end, _ = run_steps(events(run))
                if end.get("state") != "finished" or not name[1:].isdigit():
                    print(f"OVH skipped {run}: end={end.get('state')} name={name!r}")
                    continue
                arms[arm][f"{out.name}:{name[1:]}"] = steady(t)
    return arms


def overhead(outs: list[Path]) -> None:
    """(a) plain script, (b) loratui --headless, (c) loratui with the TUI attached to a pty; OUT dirs of one
    or more calls pool. The unit is the run (its mean steady step time: tokens/s is tokens over time), and
    the rounds pair: a_i, b_i, c_i ran back to back, so the per-round ratio cancels drift between rounds.
    Three intervals: paired t on log ratios (the headline), Welch t on run means, and the older bootstrap
    over pooled steps (which treats steps as independent and so is too narrow when runs differ)."""
    arms = overhead_arms(outs)
    for arm, runs in arms.items():
        for label, st in runs.items():
            print(f"OVH {arm} {label} steps={len(st) + 2} mean={statistics.fmean(st) if st else float('nan'):.3f} "
                  f"steady={','.join(f'{x:.3f}' for x in st)}")
    means = {arm: {k: statistics.fmean(v) for k, v in runs.items() if v} for arm, runs in arms.items()}
    if not means["a"]:
        print("OVH_RESULT no plain run")
        return
    for arm, label in (("b", "headless"), ("c", "TUI attached")):
        if not means[arm]:
            continue
        print(f"OVH_RESULT {arm} ({label}): " + overhead_result(means["a"], means[arm], arm))
        a_all = [x for r in arms["a"].values() for x in r]
        x_all = [x for r in arms[arm].values() for x in r]
        lo, hi = bootstrap_ratio(a_all, x_all)
        print(f"OVH_STEPS {arm}: pooled-step medians ratio {statistics.median(a_all) / statistics.median(x_all):.4f} "
              f"(step bootstrap 95% CI {lo:.4f}-{hi:.4f}; {len(a_all)} vs {len(x_all)} steps)")


def overhead_result(a: dict[str, float], x: dict[str, float], arm: str) -> str:
    """tokens/s ratio x/a = mean a step time / mean x step time, with paired and Welch intervals."""
    ratio = statistics.fmean(a.values()) / statistics.fmean(x.values())
    text = f"tokens/s ratio {arm}/a = {ratio:.4f} over {len(a)} vs {len(x)} runs"
    na, nx = len(a), len(x)
    if na >= 2 and nx >= 2:  # Welch on run means, delta method for the ratio
        va, vx = statistics.variance(a.values()) / na, statistics.variance(x.values()) / nx
        ma, mx = statistics.fmean(a.values()), statistics.fmean(x.values())
        se = ratio * math.sqrt(va / ma**2 + vx / mx**2)
        df = max(1, round((va + vx) ** 2 / (va**2 / (na - 1) + vx**2 / (nx - 1)))) if va + vx else 1
        text += (f"; Welch 95% CI {ratio - t_quantile(df, T975, 1.960) * se:.4f}-"
                 f"{ratio + t_quantile(df, T975, 1.960) * se:.4f} (df {df})")
    pairs = [math.log(a[k] / x[k]) for k in a if k in x]
    if len(pairs) >= 2:
        m, se = statistics.fmean(pairs), statistics.stdev(pairs) / math.sqrt(len(pairs))
        df = len(pairs) - 1
        text += (f"; paired by round ({len(pairs)} rounds): {math.exp(m):.4f}, 95% CI "
                 f"{math.exp(m - t_quantile(df, T975, 1.960) * se):.4f}-{math.exp(m + t_quantile(df, T975, 1.960) * se):.4f}, "
                 f"one-sided 95% lower bound {math.exp(m - t_quantile(df, T95, 1.645) * se):.4f}; "
                 f"per-round ratios {','.join(f'{math.exp(v):.4f}' for v in pairs)}")
    return text


def ckpt_params(out: Path) -> int | None:
    """The checkpoint's parameter count, from make_random_ckpt.py's `CKPT {...}` line in logs/ckpt.log or
    the copy of it the suite writes to summary.txt."""
    for log in (out / "logs" / "ckpt.log", out / "summary.txt"):
        for line in (log.read_text(errors="replace") if log.exists() else "").splitlines():
            if "CKPT {" in line:
                return json.loads("{" + line.split("CKPT {", 1)[1].split("}", 1)[0] + "}")["params"]
    return None


def throughput(out: Path) -> None:
    """Tokens/s and MFU of each variant under OUT/tput (loratui runs, plus plain_*.json from plain_trainer)."""
    rate_line = (out / "bf16_rate.txt").read_text() if (out / "bf16_rate.txt").exists() else ""
    rate = json.loads(rate_line.split(" ", 1)[1])["tflops"] if rate_line.startswith("BF16_RATE") else None
    params = ckpt_params(out)
    print(f"TPUT bf16_rate_tflops={rate} params={params}")
    rows = []
    for run in loratui_runs(out / "tput"):
        ev = events(run)
        t, end, tok = run_steps(ev)
        peaks = [e.get("peak_reserved", 0) for e in ev if e.get("kind") == "step"]
        used = [e.get("used_max", 0) for e in ev if e.get("kind") == "sample"]
        rows.append((run.name.split("-", 2)[-1], "loratui", steady(t), tok, max(peaks, default=0),
                     max(used, default=0), end.get("state")))
    for path in sorted((out / "tput").glob("plain_*.json")):
        r = json.loads(path.read_text())
        tok = r["batch"] * r["grad_accum"] * r["max_length"]  # packed: every block is full
        rows.append((path.stem[6:], "plain", steady(r["step_times"]), tok, r.get("peak_reserved") or 0, 0, "finished"))
    for name, how, st, tok, peak, used, state in rows:
        if not st:
            print(f"TPUT {name} {how} end={state} no steady steps")
            continue
        tps = tok / statistics.median(st)
        mfu = 6 * params * tps / (rate * 1e12) if params and rate else None
        print(f"TPUT {name} {how} end={state} tokens_per_step={tok} s_per_step={statistics.median(st):.3f} "
              f"tok_per_s={tps:.0f} mfu_6N={100 * mfu if mfu else float('nan'):.1f}% "
              f"torch_peak_reserved_GiB={g(peak)} device_used_peak_GiB={g(used) if used else 'n/a'} "
              f"steady={','.join(f'{x:.3f}' for x in st)}")


def main() -> None:
    cmd, args = sys.argv[1], [Path(a) for a in sys.argv[2:]]
    if cmd == "issue2":
        out = unpacked(args[0])
        issue2(*(args if len(args) > 1 else [out / "runs", out / "smi.csv"]))
    elif cmd == "spikes":
        out = unpacked(args[0])
        spikes(*(args if len(args) > 1 else [out / "runs_tiny", out / "spikes.json", out / "smi_1s.csv",
                                             out / "supervisor_cpu.json"]))
    elif cmd == "overhead":
        overhead([unpacked(a) for a in args])
    elif cmd == "throughput":
        throughput(unpacked(args[0]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
