"""A watched command (`loratui run -- COMMAND`) in its own words: its run name, the config file it names,
and advice keys spelled as the user writes them (TrainingArguments fields, or YAML keys).

Pure logic: the command line is a list of strings, nothing is opened.
"""

from __future__ import annotations

import os
import re
from typing import Any

from loratui.logic import config_keys
from loratui.logic.config_keys import AXOLOTL, LLAMAFACTORY

PYTHON = "python"
"""The dialects advice is spelled in: Python classes, LLaMA-Factory YAML, axolotl YAML."""

_SCRIPT = re.compile(r"\.(py|ya?ml|json|sh)$")
_CONFIG = re.compile(r"\.(ya?ml|json)$", re.IGNORECASE)
_TOOL = re.compile(r"llamafactory|llama_factory|axolotl", re.IGNORECASE)
_CLASSES = {"training": "TrainingArguments", "lora": "LoraConfig", "quantization": "BitsAndBytesConfig",
            "model": "from_pretrained"}


def config_index(command: list[str]) -> int | None:
    """Where the YAML/JSON config of a LLaMA-Factory or axolotl command is in `command`: the first config
    after the tool's own word (so `accelerate launch --config_file acc.yaml -m axolotl.cli.train x.yml`
    names x.yml), else the first config of the line; None when there is none."""
    start = next((i for i, arg in enumerate(command) if _TOOL.search(os.path.basename(arg))), 0)
    for begin in (start, 0):
        for index in range(max(begin, 1), len(command)):
            arg = command[index]
            if _CONFIG.search(arg) and not arg.startswith("-") and "=" not in arg:
                return index
    return None


def config_file(command: list[str]) -> str:
    """The YAML/JSON config a LLaMA-Factory or axolotl command names, or ''."""
    index = config_index(command)
    return command[index] if index is not None else ""


def with_config(command: list[str], path: str) -> list[str]:
    """`command` with its config file replaced by `path` (the fixed copy), everything else as it was."""
    index = config_index(command)
    if index is None:
        raise ValueError("the command names no config file")
    return [*command[:index], path, *command[index + 1:]]


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


_PYTHON = re.compile(r"python[\d.]*$")
_BLOCKERS = "IES"
"""Python's options that keep the startup hook out: -I (isolated: no PYTHONPATH, no user site), -E (no PYTHON*
variables), -S (no site, so no sitecustomize)."""
_TAKES_VALUE = "WX"
"""Options whose value may follow as the next argument (`-W ignore`, `-X importtime`)."""


def hook_blocked(command: list[str]) -> str:
    """The options of a watched `python ...` command that keep loratui's hook out of it ('-I', '-E -S'), or ''.
    Only the interpreter's own options count: they end at -c, -m, `-` or the script, whose arguments are its own."""
    if not command or not _PYTHON.match(os.path.basename(command[0])):
        return ""
    found: list[str] = []
    args = iter(command[1:])
    for arg in args:
        if arg in ("-", "--") or not arg.startswith("-") or arg.startswith("--"):
            break
        letters = arg[1:]
        for i, letter in enumerate(letters):
            if letter in "cm":
                return " ".join(sorted(found))
            if letter in _BLOCKERS and f"-{letter}" not in found:
                found.append(f"-{letter}")
            if letter in _TAKES_VALUE:
                if i == len(letters) - 1:
                    next(args, None)  # the value is the next argument
                break
    return " ".join(sorted(found))


def hook_blocked_note(flags: str) -> str:
    return (f"python {flags} keeps loratui's hook out (Python then ignores PYTHONPATH or site): no Trainer is hooked, "
            "so steps and losses come from printed output only, and save, suspend and a pause between steps do "
            f"not apply; run it without {flags} to have the Trainer hooked")


def python_name(dotted: str) -> str:
    """`training.per_device_train_batch_size` as a Python user writes it: `TrainingArguments.<field>`."""
    section, _, key = dotted.partition(".")
    if section == "env":
        return dotted
    if section == "data" and key == "max_length":
        return "max_length (tokenizer truncation; under TRL, SFTConfig's or DPOConfig's max_length)"
    return f"{_CLASSES[section]}.{key}" if section in _CLASSES else dotted


def speak(change: dict[str, Any], spoken: str, config: str = "", command: list[str] | None = None
          ) -> config_keys.Spoken:
    """An advice's change spelled for the user's own code or config file, with what `A` may write there
    (only into a LLaMA-Factory or axolotl YAML config the command names)."""
    if spoken in config_keys.KEYS:
        return config_keys.speak(change, spoken, config, command or [], python_name)
    return config_keys.Spoken({python_name(key): value for key, value in change.items()},
                              no_fix=_why_not_in_code(change, command or []))


def _why_not_in_code(change: dict[str, Any], command: list[str]) -> str:
    """Why `A` writes nothing for a script (the panel and `A` itself say it): loratui never edits code."""
    if not change:
        return ""
    if all(key.startswith("env.") for key in change):
        return "A: this changes only the environment; set it before the command and run it again"
    name = run_name(command) if command else "your script"
    script = next((os.path.basename(a) for a in command[1:] if a.endswith(".py") and not a.startswith("-")), name)
    return f"A: loratui does not rewrite your code; make this change in {script} and run it again"


SECRET = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
_SUMMARISED = re.compile(r"^(CUDA_|NCCL_|PYTORCH_|TORCH_|HF_|TRANSFORMERS_|ACCELERATE_|WANDB_|"
                         r"OMP_NUM_THREADS$|"
                         r"MASTER_|WORLD_SIZE$|RANK$|LOCAL_RANK$|VIRTUAL_ENV$|CONDA_DEFAULT_ENV$|PYTHONPATH$|"
                         r"TOKENIZERS_PARALLELISM$|BNB_|DS_|DEEPSPEED_)")


_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s]*@")
"""A URL's `user:password@` (HF_ENDPOINT=https://user:token@mirror/, WANDB_BASE_URL, a proxy)."""


def env_summary(env: dict[str, str]) -> dict[str, str]:
    """The variables that shape a training run, secrets' values dropped (`HF_TOKEN: <redacted>`, and the
    `user:pass@` of a URL in any value: `https://<redacted>@mirror/`)."""
    return {key: ("<redacted>" if SECRET.search(key) else _USERINFO.sub(r"\1<redacted>@", value)[:300])
            for key, value in sorted(env.items()) if _SUMMARISED.match(key)}
