"""A watched command (`loratui run -- COMMAND`) in its own words: its run name, the config file it names,
and advice keys spelled as the user writes them (TrainingArguments fields, or YAML keys).

Pure logic: the command line is a list of strings, nothing is opened.
"""

from __future__ import annotations

import os
import re
from typing import Any

PYTHON, LLAMAFACTORY, AXOLOTL = "python", "llamafactory", "axolotl"
"""The dialects advice is spelled in: Python classes, LLaMA-Factory YAML, axolotl YAML."""

_SCRIPT = re.compile(r"\.(py|ya?ml|json|sh)$")
_CLASSES = {"training": "TrainingArguments", "lora": "LoraConfig", "quantization": "BitsAndBytesConfig",
            "model": "from_pretrained"}
# recipe key -> (YAML key, how the value is written there). Only keys whose meaning is the same.
_YAML_KEYS: dict[str, dict[str, str]] = {
    LLAMAFACTORY: {
        "lora.r": "lora_rank", "lora.lora_alpha": "lora_alpha", "lora.lora_dropout": "lora_dropout",
        "lora.target_modules": "lora_target", "data.max_length": "cutoff_len",
        "quantization.load_in_4bit": "quantization_bit",
        "quantization.bnb_4bit_quant_type": "quantization_type",
        "quantization.bnb_4bit_use_double_quant": "double_quantization",
    },
    AXOLOTL: {
        "training.per_device_train_batch_size": "micro_batch_size", "training.optim": "optimizer",
        "lora.r": "lora_r", "lora.target_modules": "lora_target_modules", "data.max_length": "sequence_len",
        "quantization.load_in_4bit": "load_in_4bit", "quantization.load_in_8bit": "load_in_8bit",
        "training.use_liger_kernel": "liger_fused_linear_cross_entropy",
    },
}


def config_file(command: list[str]) -> str:
    """The YAML/JSON config a LLaMA-Factory or axolotl command names, or ''."""
    for arg in command[1:]:
        if re.search(r"\.(ya?ml|json)$", arg) and not arg.startswith("-"):
            return arg
    return ""


def dialect(command: list[str]) -> str:
    """Which vocabulary the user configures this command in."""
    words = " ".join(os.path.basename(arg) for arg in command).lower()
    if config_file(command):
        if "llamafactory" in words or "llama_factory" in words:
            return LLAMAFACTORY
        if "axolotl" in words:
            return AXOLOTL
    return PYTHON


def run_name(command: list[str]) -> str:
    """The run's default name: the script or config file's stem, else the module's or program's name."""
    files = [arg for arg in command[1:] if _SCRIPT.search(arg) and not arg.startswith("-")]
    if files:
        return _SCRIPT.sub("", os.path.basename(files[0]))
    for index, arg in enumerate(command):
        if arg == "-m" and index + 1 < len(command):
            return command[index + 1].rsplit(".", 1)[-1]
    return _SCRIPT.sub("", os.path.basename(command[0])) if command else "command"


def field_name(dotted: str, spoken: str, config: str = "") -> str:
    """`training.per_device_train_batch_size` as the user writes it in `spoken`'s dialect."""
    section, _, key = dotted.partition(".")
    if section == "env":
        return dotted
    if spoken in _YAML_KEYS:
        name = _YAML_KEYS[spoken].get(dotted, key)
        return f"{name} ({os.path.basename(config)})" if config else name
    if section == "data" and key == "max_length":
        return "max_length (tokenizer truncation; SFTConfig.max_length under TRL)"
    return f"{_CLASSES[section]}.{key}" if section in _CLASSES else dotted


def spoken_change(change: dict[str, Any], spoken: str, config: str = "") -> dict[str, Any]:
    """An advice's change with its keys spelled for the user's own code or config file."""
    out: dict[str, Any] = {}
    for key, value in change.items():
        name = field_name(key, spoken, config)
        if spoken == LLAMAFACTORY and key == "quantization.load_in_4bit":
            value = 4 if value else None  # LLaMA-Factory: quantization_bit: 4
        out[name] = value
    return out


SECRET = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
_SUMMARISED = re.compile(r"^(CUDA_|NCCL_|PYTORCH_|TORCH_|HF_|TRANSFORMERS_|ACCELERATE_|WANDB_|"
                         r"OMP_NUM_THREADS$|"
                         r"MASTER_|WORLD_SIZE$|RANK$|LOCAL_RANK$|VIRTUAL_ENV$|CONDA_DEFAULT_ENV$|PYTHONPATH$|"
                         r"TOKENIZERS_PARALLELISM$|BNB_|DS_|DEEPSPEED_)")


def env_summary(env: dict[str, str]) -> dict[str, str]:
    """The variables that shape a training run, secrets' values dropped (`HF_TOKEN: <redacted>`)."""
    return {key: ("<redacted>" if SECRET.search(key) else value[:300])
            for key, value in sorted(env.items()) if _SUMMARISED.match(key)}
