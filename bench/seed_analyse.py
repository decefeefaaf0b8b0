"""Issue 17's figures from bench/seed_overhead.sh's output: watched (b) vs plain (a) tokens/s, and the estimate.

    python bench/seed_analyse.py OUT   (a directory with plain/a*.json and runs/*/events.jsonl, or an archive
                                        of one: bench/results/h200-2026-12-03-seed-trainer.tar.xz)

tokens/s of a run = tokens of steps 3..N over their summed step times, both arms timed by the script's own
callback (the `SEED` line: plain/aN.json, or the watched run's `output` events); loratui's `step` events give
the watched runs' figure a second time. The ratio b/a per round, and the paired t interval over the per-round
log ratios (gpu_analyse.T975/T95, as for the recipe overhead). Then, per watched run: the `estimate` event's
peak_device_gib, the measured device-used peak (max `sample` used_max) and the supervisor's notice.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_analyse import GIB, T95, T975, events, t_quantile, unpacked


def rate(times: list[float], tokens: int) -> float | None:
    kept = times[2:]
    return tokens * len(kept) / sum(kept) if kept else None


def seed_line(ev: list[dict]) -> dict | None:
    for e in ev:
        if e.get("kind") == "output":
            for line in e.get("lines", []):
                if line.startswith("SEED "):
                    return json.loads(line[5:])
    return None


def main() -> None:
    out = unpacked(Path(sys.argv[1]))
    a: dict[str, float] = {}
    b: dict[str, float] = {}
    med: dict[str, dict[str, float]] = {"a": {}, "b": {}}  # median steady step time per run (robust, secondary)
    for path in sorted(out.glob("plain/a*.json")):
        d = json.loads(path.read_text())
        a[path.stem[1:]] = rate(d["step_times"], d["tokens_per_step"])
        med["a"][path.stem[1:]] = statistics.median(d["step_times"][2:])
        print(f"SEED_A {path.stem} tok/s={a[path.stem[1:]]:.1f} steps={len(d['step_times'])} "
              f"peak_reserved={(d['peak_reserved'] or 0) / GIB:.2f} GiB")
    for run in sorted(p for p in (out / "runs").glob("*") if (p / "events.jsonl").exists()):
        ev = events(run)
        name = run.name.rsplit("-", 1)[-1]
        end = next((e for e in ev if e.get("kind") == "end"), {})
        seed = seed_line(ev)
        steps = [e for e in ev if e.get("kind") == "step" and e.get("rank", 0) == 0]
        own = rate(seed["step_times"], seed["tokens_per_step"]) if seed else None
        lt = rate([s["step_time"] for s in steps], int(statistics.median(s.get("tokens", 0) for s in steps))) \
            if steps else None
        if own is not None and end.get("state") == "finished":
            b[name[1:]] = own
            med["b"][name[1:]] = statistics.median(seed["step_times"][2:])
        est = next((e for e in ev if e.get("kind") == "estimate"), {})
        used = max((e["used_max"] for e in ev if e.get("kind") == "sample"), default=None)
        notes = [e["message"] for e in ev if e.get("kind") == "notice" and e.get("key") == "estimate"]
        est_gib = est.get("peak_device_gib")
        err = f"{(used / GIB - est_gib) / est_gib:+.1%}" if used and est_gib else "n/a"
        print(f"SEED_B {name} end={end.get('state')} tok/s script={own and round(own, 1)} "
              f"loratui_steps={lt and round(lt, 1)} steps={len(steps)}")
        print(f"SEED_EST {name} estimate peak_device={est_gib and round(est_gib, 2)} GiB "
              f"(reserved {est.get('peak_reserved_gib') and round(est['peak_reserved_gib'], 2)}, seq {est.get('seq')}) "
              f"measured used_max={used and round(used / GIB, 2)} GiB ({err}); notices: {' | '.join(notes)}")
    pairs = {k: math.log(b[k] / a[k]) for k in sorted(a) if k in b}
    for k, v in pairs.items():
        print(f"SEED_ROUND {k} a={a[k]:.1f} b={b[k]:.1f} b/a={math.exp(v):.4f}")
    mp = {k: med["a"][k] / med["b"][k] for k in sorted(med["a"]) if k in med["b"]}
    if mp:
        print("SEED_MEDIAN per-round ratio of median steady step times a/b (secondary, robust to the odd slow "
              f"step): {', '.join(f'{k}: {v:.4f}' for k, v in mp.items())}; geometric mean "
              f"{math.exp(statistics.fmean(math.log(v) for v in mp.values())):.4f}")
    if len(pairs) >= 2:
        vals = list(pairs.values())
        m, se, df = statistics.fmean(vals), statistics.stdev(vals) / math.sqrt(len(vals)), len(vals) - 1
        print(f"SEED_RESULT tokens/s ratio b/a = {math.exp(m):.4f} (geometric mean of {len(vals)} rounds), 95% CI "
              f"{math.exp(m - t_quantile(df, T975, 1.960) * se):.4f}-{math.exp(m + t_quantile(df, T975, 1.960) * se):.4f}, "
              f"one-sided 95% lower bound {math.exp(m - t_quantile(df, T95, 1.645) * se):.4f}")
    elif pairs:
        print(f"SEED_RESULT one round only: b/a = {math.exp(next(iter(pairs.values()))):.4f}")
    else:
        print("SEED_RESULT no complete round")


if __name__ == "__main__":
    main()
