"""Hold device-memory spikes of known length and log their wall-clock times (issue 9's fidelity check).

    python bench/spike_helper.py OUT.json [--go FILE] [--gib 4] [--ms 10,30,100,300] [--count 10] [--gap 0.45]

Creates its CUDA context at once, then waits for FILE to exist (so the context's 0.6 GiB is part of the
baseline before the first spike). Each spike: `torch.empty(GiB)` (a cudaMalloc: device used rises), a busy
hold of the given length, then `del` + `torch.cuda.empty_cache()` (a cudaFree: device used falls again).
Durations are shuffled (seeded) so every length is spread over the whole phase; gaps are >= `gap` s plus a
random 0-150 ms so the spikes do not lock onto the sampler's windows.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--go", default=None)
    p.add_argument("--gib", type=float, default=4.0)
    p.add_argument("--ms", default="10,30,100,300")
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--gap", type=float, default=0.45)
    p.add_argument("--wait-s", type=float, default=300.0)
    p.add_argument("--cpu", action="store_true", help="dry run without CUDA (tests the logic)")
    a = p.parse_args()
    import torch

    device = "cpu" if a.cpu else "cuda"
    torch.zeros(1, device=device)
    if not a.cpu:
        torch.cuda.synchronize()
    print(f"helper ready pid={os.getpid()}", flush=True)
    if a.go:
        deadline = time.monotonic() + a.wait_s
        while not os.path.exists(a.go):
            if time.monotonic() > deadline:
                print("no go file: giving up", flush=True)
                return 1
            time.sleep(0.02)
    order = [int(ms) for ms in a.ms.split(",") for _ in range(a.count)]
    random.Random(9).shuffle(order)
    jitter = random.Random(7)
    nbytes = int(a.gib * 2**30)
    spikes = []
    for ms in order:
        t_alloc0 = time.time()
        x = torch.empty(nbytes, dtype=torch.uint8, device=device)
        if not a.cpu:
            torch.cuda.synchronize()
        t_alloc1 = time.time()
        p0 = time.perf_counter()
        while time.perf_counter() - p0 < ms / 1000:
            pass
        t_end = time.time()
        del x
        if not a.cpu:
            torch.cuda.empty_cache()
            torch.cuda.synchronize()
        t_free = time.time()
        spikes.append({"ms": ms, "alloc0": t_alloc0, "alloc1": t_alloc1, "end": t_end, "free": t_free,
                       "held_ms": round((t_end - t_alloc1) * 1000, 2)})
        time.sleep(a.gap + jitter.uniform(0, 0.15))
    with open(a.out, "w") as f:
        json.dump({"gib": a.gib, "spikes": spikes}, f)
    print(f"helper done: {len(spikes)} spikes", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
