"""A plain PyTorch loop with a tqdm bar and printed losses: no Trainer for loratui to hook."""

import sys
import time

import torch
from tqdm import tqdm

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(256, 16)
y = x.sum(dim=1, keepdim=True)
bar = tqdm(range(steps), desc="train", mininterval=0.05)
for step in bar:
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    time.sleep(0.1)  # a real step takes time
    bar.set_postfix(loss=f"{loss.item():.4f}")
    if step % 5 == 4:
        tqdm.write(f"step {step + 1} loss={loss.item():.4f}")
print("done")
