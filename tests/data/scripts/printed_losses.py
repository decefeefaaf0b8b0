"""A plain PyTorch loop that prints its loss in one framework's spelling (argv[1]), recording what it printed.

Forms: `plain` (`step 5 loss 22.4671`), `colon` (`step 5: loss 22.4671`), `pipe` (`step 5 | loss 22.4671`),
`slash` (`Step 5/40 | loss 22.4671`), `tqdm` (a bar's `loss=` postfix), `lightning` (a bar's
`train_loss=` postfix), `keras` (`5/40 [=====>....] - loss: 22.4671`). The losses start above the step
numbers (a regression on a large target) so a loss read as the step is caught. argv[3] gets the printed
losses as JSON, for the test to compare with what loratui recorded.
"""

import json
import sys
import time

import torch
from tqdm import tqdm

form, steps, record = sys.argv[1], int(sys.argv[2]), sys.argv[3]
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.02)
x = torch.randn(64, 8)
y = 5.0 + x.sum(dim=1, keepdim=True)
printed: list[float] = []
bar = tqdm(range(1, steps + 1), desc="Epoch 0", mininterval=0) if form in ("tqdm", "lightning") else None
for step in bar if bar is not None else range(1, steps + 1):
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    text = f"{loss.item():.4f}"
    printed.append(float(text))
    if form == "plain":
        print(f"step {step} loss {text}", flush=True)
    elif form == "colon":
        print(f"step {step}: loss {text}", flush=True)
    elif form == "pipe":
        print(f"step {step} | loss {text}", flush=True)
    elif form == "slash":
        print(f"Step {step}/{steps} | loss {text} | lr 0.02", flush=True)
    elif form == "keras":
        done = "=" * (30 * step // steps)
        print(f"{step}/{steps} [{done:<30}] - 0s 2ms/step - loss: {text}", flush=True)
    elif bar is not None:
        bar.set_postfix({"loss" if form == "tqdm" else "train_loss": text, "v_num": 0})
        time.sleep(0.05)  # a step takes time: some redraws are read apart
with open(record, "w") as f:
    json.dump(printed, f)
print("done", flush=True)
