"""A hand-written loop that prints its own records (`{'loss': ..., 'step': N}`) with print() on stdout while tqdm
draws its bar on stderr: the two streams are read in turns, so the bar's position says little of a record's step."""

import math
import sys
import time

from tqdm import tqdm

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 60
bar = tqdm(total=steps)
for step in range(1, steps + 1):
    time.sleep(0.02)  # fast steps: several pass between two reads of the output
    loss = 3.0 * math.exp(-step / 20) + 0.1
    if step % 5 == 0:
        print({"loss": round(loss, 4), "step": step}, flush=True)
    bar.update(1)
bar.close()
