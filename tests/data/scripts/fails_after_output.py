"""A plain loop that prints what training scripts print (a tqdm bar, Trainer-style dicts, a FutureWarning)
and then fails with a RuntimeError whose message is one line: nothing printed around the traceback belongs
in the diagnosis. stdout is a pipe (block-buffered), so its dicts reach the log after the traceback."""

import sys
import warnings

from tqdm import tqdm

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 6
bar = tqdm(range(1, steps + 1), desc="train", mininterval=0)
for step in bar:
    bar.set_postfix(loss=f"{10.0 / step:.4f}")
    loss, epoch = f"{10.0 / step:.4g}", step / 10
    tqdm.write(f"{{'loss': '{loss}', 'grad_norm': '1.5', 'learning_rate': '0.0002', 'epoch': '{epoch}'}}")
    if step == steps // 2:
        warnings.warn("`torch_dtype` is deprecated! Use `dtype` instead!", FutureWarning, stacklevel=1)
    if step == steps:
        raise RuntimeError("expected scalar type Float but found BFloat16")
