"""A plain PyTorch loop (no Trainer, no recipe) whose SGD learning rate is far too high: the printed loss
explodes, then turns inf and NaN. loratui cannot know the rate the script sets."""

import torch

torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=5.0)
x = torch.randn(64, 8)
y = 5.0 + x.sum(dim=1, keepdim=True)
for step in range(1, 41):
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}", flush=True)
