"""loratui: run and watch LoRA/QLoRA fine-tuning in a terminal app that survives SSH drops."""

__version__ = "0.1.0"
