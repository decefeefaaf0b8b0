"""loratui: run and watch LoRA/QLoRA fine-tuning in a terminal app that survives SSH drops."""

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """`loratui.LoratuiCallback` loads transformers only when asked for: `import loratui` stays light."""
    if name == "LoratuiCallback":
        from loratui.trainer.watch import LoratuiCallback

        return LoratuiCallback
    raise AttributeError(f"module 'loratui' has no attribute {name!r}")
