"""Resuming restores the optimizer's and scheduler's learning rates; a recipe whose learning_rate changed
(the guard halves it after a NaN) must win over them. No torch import: plain attribute work."""

from __future__ import annotations

from typing import Any


def rescale_lr(optimizer: Any, lr_scheduler: Any, learning_rate: float) -> None:
    """Make the scheduler's base rate `learning_rate`, scaling the optimizer's current rates alike."""
    scheduler = getattr(lr_scheduler, "scheduler", lr_scheduler)  # accelerate wraps it
    base = getattr(scheduler, "base_lrs", None)
    if not base or not base[0] or optimizer is None:
        return
    scale = learning_rate / base[0]
    if abs(scale - 1.0) < 1e-9:
        return
    scheduler.base_lrs = [lr * scale for lr in base]
    for group in optimizer.param_groups:
        group["lr"] *= scale
        if "initial_lr" in group:
            group["initial_lr"] *= scale
