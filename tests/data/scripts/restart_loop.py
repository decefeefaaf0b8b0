"""A plain loop in two phases, each printing `step 1/N .. step N/N loss X` (a warm-up, then the main loop)."""

import sys
import time

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
for phase in (1, 2):
    for step in range(1, steps + 1):
        time.sleep(0.02)
        print(f"step {step}/{steps} loss {3.0 / (phase * step):.4f}", flush=True)
print("done", flush=True)
