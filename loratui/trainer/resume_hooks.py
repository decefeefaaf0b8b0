"""Callbacks for restarts made by the guard: the recipe's learning rate wins over a resumed scheduler's,
and (for tests only) injected faults.

Resuming restores the optimizer's and scheduler's state, learning rate included, so a recipe whose
learning_rate was halved would train on at the old rate; `LrFromRecipe` rescales after the load.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from loratui.trainer.lr_rescale import rescale_lr

OOM_AT_STEP = "LORATUI_TEST_OOM_AT_STEP"
OOM_ONCE = "LORATUI_TEST_OOM_ONCE"
HANG_AT_STEP = "LORATUI_TEST_HANG_AT_STEP"
NAN_AT_STEP = "LORATUI_TEST_NAN_AT_STEP"
"""Poison one trainable weight with NaN after this step: the next step's loss is a real NaN, computed by the
model itself (the guard's NaN restart is checked on the GPU and on the CPU with it)."""
NAN_ALWAYS = "LORATUI_TEST_NAN_ALWAYS"
"""With NAN_AT_STEP: poison the weight in every life of the run, a guard restart's too (a NaN no move cures: the
crash loop's test)."""
CARD_GIB = "LORATUI_TEST_CARD_GIB"
"""Simulate a smaller card (torch's per-process memory fraction), for the GPU checks of the guard."""
FIXED_HEADER = "# Written by loratui"


class LrFromRecipe(TrainerCallback):
    """After a resume, scale the restored learning rates so the base rate is the recipe's."""

    def on_train_begin(self, args: Any, state: Any, control: Any, optimizer: Any = None,
                       lr_scheduler: Any = None, **kwargs: Any) -> None:
        if state.global_step:
            rescale_lr(optimizer, lr_scheduler, args.learning_rate)


class InjectedFaults(TrainerCallback):
    """Test-only faults, set by environment variables the tests use: an OOM-like RuntimeError at a step
    (`LORATUI_TEST_OOM_ONCE=1`: only while the run's recipe is the one it started with), a hang, or NaN
    weights (only while the recipe is the original: a guard restart trains clean)."""

    def __init__(self, recipe_path: Path) -> None:
        self.recipe_path = recipe_path
        self.oom_at = int(os.environ.get(OOM_AT_STEP, "0") or 0)
        self.hang_at = int(os.environ.get(HANG_AT_STEP, "0") or 0)
        self.nan_at = int(os.environ.get(NAN_AT_STEP, "0") or 0)

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if self.nan_at and state.global_step == self.nan_at and model is not None and \
                (self._original_recipe() or os.environ.get(NAN_ALWAYS)):
            poison_a_weight(model)
        if self.oom_at and state.global_step == self.oom_at and self._still_original():
            raise RuntimeError(f"CUDA out of memory. Tried to allocate 20.00 MiB (injected by {OOM_AT_STEP} at "
                               f"step {self.oom_at})")
        if self.hang_at and state.global_step == self.hang_at:
            injected_hang()

    def _original_recipe(self) -> bool:
        return not self.recipe_path.read_text(encoding="utf-8").startswith(FIXED_HEADER)

    def _still_original(self) -> bool:
        if not os.environ.get(OOM_ONCE):
            return True
        return not self.recipe_path.read_text(encoding="utf-8").startswith(FIXED_HEADER)


def poison_a_weight(model: Any) -> None:
    """Fill the first trainable weight with NaN, as an overflow in the optimizer's update would."""
    import torch

    with torch.no_grad():
        next(p for p in model.parameters() if p.requires_grad).fill_(float("nan"))


def injected_hang() -> None:
    """Wait forever, as a rank stuck in a collective would (named so a stack dump shows it)."""
    threading.Event().wait()


def extra_callbacks(recipe_path: Path) -> list[Any]:
    """The callbacks to add to the Trainer: the learning-rate fix, and faults when a test asks."""
    found: list[Any] = [LrFromRecipe()]
    if os.environ.get(CARD_GIB):
        import torch

        if torch.cuda.is_available():
            total = torch.cuda.get_device_properties(0).total_memory
            torch.cuda.set_per_process_memory_fraction(min(1.0, float(os.environ[CARD_GIB]) * (1 << 30) / total))
    if os.environ.get(OOM_AT_STEP) or os.environ.get(HANG_AT_STEP) or os.environ.get(NAN_AT_STEP):
        found.append(InjectedFaults(recipe_path))
    return found
