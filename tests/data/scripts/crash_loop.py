"""A plain loop that prints `step N loss X` and crashes right after step 25: its traceback on stderr follows the
last step's line on stdout."""

import time

for step in range(1, 30):
    time.sleep(0.02)
    print(f"step {step} loss {3.0 / step:.4f}", flush=True)
    if step == 25:
        raise RuntimeError("CUDA error: device-side assert triggered")
