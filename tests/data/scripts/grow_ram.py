"""A loop whose host memory grows every step (a leak, or a dataset read whole into RAM): under a Slurm
memory limit the job's cgroup kills it with a bare SIGKILL, no traceback."""

import sys
import time

held = []
for step in range(1, 10_000):
    held.append(bytearray(int(sys.argv[1]) << 20 if len(sys.argv) > 1 else 25 << 20))  # zero-filled: touched
    print(f"step {step} loss={1.0 / step:.4f}", flush=True)
    time.sleep(0.3)
