"""Issue 24 item 1's figures from bench/trl_estimate.sh's output: the estimate against the measured peak.

    python bench/trl_estimate_analyse.py OUT   (a directory with runs/*/events.jsonl and logs/, or its archive:
                                                bench/results/h200-2026-12-03-trl-estimate*.tar.xz)

Per watched run: the `estimate` event (device and reserved GiB, at which length, the loss path it modelled), the
measured device-used peak (max `sample` used_max), torch's per-step peaks from steps 2 on (`step` events), the
error, and the script's own `FACTS` line. Per run alone: the FACTS line and nvidia-smi's peak (used + reserved).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_analyse import GIB, events, unpacked


def facts_in(lines: list[str]) -> dict:
    for line in lines:
        if line.startswith("FACTS "):
            return json.loads(line[6:])
    return {}


def watched(run: Path) -> str:
    ev = events(run)
    est = next((e for e in ev if e.get("kind") == "estimate"), None)
    used = max((e["used_max"] for e in ev if e.get("kind") == "sample"), default=0) / GIB
    steps = [e for e in ev if e.get("kind") == "step" and e.get("step", 0) >= 2]
    reserved = max((e.get("peak_reserved") or 0 for e in steps), default=0) / GIB
    allocated = max((e.get("peak_allocated") or 0 for e in steps), default=0) / GIB
    out = [line for e in ev if e.get("kind") == "output" for line in e.get("lines", [])]
    notices = [e["message"] for e in ev if e.get("kind") == "notice" and "estimat" in e.get("message", "")]
    end = next((e.get("state") for e in ev if e.get("kind") == "end"), "?")
    name = run.name.rsplit("-", 1)[-1]
    text = f"WATCHED {name} end={end} steps={len(steps) + 1} measured_device={used:.2f} " \
           f"torch_peak_reserved={reserved:.2f} allocated={allocated:.2f}"
    if est:
        err = (est["peak_device_gib"] - used) / used * 100 if used else float("nan")
        comps = {k: round(v, 2) for k, v in est.get("components", {}).items()}
        text += f" estimate={est['peak_device_gib']:.2f} (reserved {est['peak_reserved_gib']:.2f}, " \
                f"seq {est.get('seq')}) error={err:+.1f}%\n  components {json.dumps(comps)}"
    for message in notices:
        text += f"\n  notice {message}"
    return text + f"\n  facts {json.dumps(facts_in(out))}"


def alone(log: Path, smi: Path) -> str:
    facts = facts_in(log.read_text(errors="replace").splitlines())
    peak = 0.0
    if smi.exists():
        for row in smi.read_text().splitlines():
            parts = [p.strip() for p in row.split(",")]
            try:
                peak = max(peak, sum(float(p) for p in parts[1:3]) / 1024)
            except ValueError:
                continue
    mib = {k: round(v / GIB, 2) for k, v in facts.items() if k.startswith(("max_", "alloc", "script_")) and v}
    return f"ALONE {log.stem} smi_used_plus_reserved={peak:.2f} GiB torch={json.dumps(mib)}\n  facts {json.dumps(facts)}"


def main() -> None:
    out = unpacked(Path(sys.argv[1]))
    for run in sorted(p for p in (out / "runs").glob("*") if (p / "events.jsonl").exists()):
        print(watched(run))
    for log in sorted((out / "logs").glob("?a*.log*")):
        print(alone(log, out / "smi" / (log.name.split(".")[0] + ".csv")))


if __name__ == "__main__":
    main()
