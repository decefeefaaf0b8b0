"""A loop whose host memory grows every step (a leak, or a dataset read whole into RAM): under a Slurm
memory limit the job's cgroup kills it with a bare SIGKILL, no traceback. It stops growing at a cap
(argv[2] MiB, 1500 by default), so where no limit is enforced it never threatens the host."""

import sys
import time

per_step = int(sys.argv[1]) if len(sys.argv) > 1 else 25
cap = int(sys.argv[2]) if len(sys.argv) > 2 else 1500
held = []
for step in range(1, 10_000):
    if len(held) * per_step < cap:
        held.append(bytearray(per_step << 20))  # zero-filled: every page touched
    print(f"step {step} loss={1.0 / step:.4f}", flush=True)
    time.sleep(0.3)
