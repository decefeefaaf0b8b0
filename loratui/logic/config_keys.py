"""The YAML keys of a LLaMA-Factory or axolotl config that carry each advice move, and what `A` may write.

Every name here was checked against the projects' own sources (cited per entry), never guessed: a key that
a tool does not have makes `A` unavailable for that advice (with the reason), rather than a config the
tool refuses (LLaMA-Factory's parser rejects unknown keys) or silently ignores (axolotl).

Pure logic: recipe keys and values in, YAML keys and values out.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

LLAMAFACTORY, AXOLOTL = "llamafactory", "axolotl"
TOOL_NAMES = {LLAMAFACTORY: "LLaMA-Factory", AXOLOTL: "axolotl"}
YAML_SUFFIXES = (".yaml", ".yml")
CONFIG_SUFFIXES = {LLAMAFACTORY: (*YAML_SUFFIXES, ".json"), AXOLOTL: YAML_SUFFIXES}
"""The configs `A` rewrites: LLaMA-Factory parses a .json config too (hparams/parser.py), axolotl YAML only."""
LIGER_PLUGIN = "axolotl.integrations.liger.LigerPlugin"
MERGED_LISTS = frozenset({"plugins"})
"""YAML keys whose list the fix adds to (keeping the user's items) rather than replaces."""



class ConfigEditError(ValueError):
    """A config's text cannot take a change (yaml_edit, json_edit): `line` (1-based; 0 when unknown) and what
    is wrong there."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line, self.message = line, message


Move = Callable[[Any], "dict[str, Any] | None"]
"""A recipe value -> the YAML keys and values that carry it ({}: the tool derives it; None: no key)."""


def _same(name: str) -> Move:
    return lambda value: {name: value}


def _derived(_value: Any) -> dict[str, Any]:
    return {}


def _no_key(_value: Any) -> None:
    return None


def _only_true(keys: dict[str, Any]) -> Move:
    return lambda value: dict(keys) if value is True else None


def _table(value_map: dict[Any, dict[str, Any]]) -> Move:
    return lambda value: dict(value_map[value]) if value in value_map else None


# transformers' TrainingArguments fields that LLaMA-Factory takes under their own names: its
# TrainingArguments subclasses Seq2SeqTrainingArguments (hiyouga/LLaMA-Factory
# src/llamafactory/hparams/training_args.py; parser.py `_TRAIN_ARGS = [ModelArguments, DataArguments,
# TrainingArguments, FinetuningArguments, GeneratingArguments]`, all parsed from the one YAML).
_HF_FIELDS = ("per_device_train_batch_size", "gradient_accumulation_steps", "per_device_eval_batch_size",
              "eval_accumulation_steps", "learning_rate", "optim", "bf16", "fp16", "save_only_model",
              "dataloader_num_workers", "dataloader_pin_memory")

LLAMAFACTORY_KEYS: dict[str, Move] = {
    **{f"training.{name}": _same(name) for name in _HF_FIELDS},
    # hparams/model_args.py BaseModelArguments: `disable_gradient_checkpointing` (checkpointing is on by
    # default), `enable_liger_kernel`, `flash_attn: auto|disabled|sdpa|fa2` (extras/constants.py
    # AttentionFunction).
    "training.gradient_checkpointing": lambda value: {"disable_gradient_checkpointing": not value},
    "training.use_liger_kernel": _same("enable_liger_kernel"),
    "model.attn_implementation": _table({"sdpa": {"flash_attn": "sdpa"}, "flash_attention_2": {"flash_attn": "fa2"},
                                         "eager": {"flash_attn": "disabled"}}),
    # hparams/model_args.py QuantizationArguments: quantization_bit, quantization_type (nf4|fp4),
    # double_quantization; the 4-bit compute dtype follows bf16/fp16 (parser.py: `if training_args.bf16
    # ...: model_args.compute_dtype = torch.bfloat16 elif training_args.fp16: ... torch.float16`).
    # The weights' dtype follows bf16/fp16 there (parser.py, above): no key of its own for `model.dtype`.
    "model.dtype": _no_key,
    "quantization.load_in_4bit": _only_true({"quantization_bit": 4}),
    "quantization.load_in_8bit": _only_true({"quantization_bit": 8}),
    "quantization.bnb_4bit_quant_type": _same("quantization_type"),
    "quantization.bnb_4bit_use_double_quant": _same("double_quantization"),
    "quantization.bnb_4bit_compute_dtype": _derived,
    # hparams/data_args.py DataArguments: cutoff_len, packing.
    "data.max_length": _same("cutoff_len"),
    "data.packing": _same("packing"),
    # hparams/finetuning_args.py LoraArguments: lora_rank, lora_alpha, lora_dropout, lora_target (a
    # comma-separated string; `all` for every linear module).
    "lora.r": _same("lora_rank"),
    "lora.lora_alpha": _same("lora_alpha"),
    "lora.lora_dropout": _same("lora_dropout"),
    "lora.target_modules": lambda value: {"lora_target": "all" if value == "all-linear" else
                                          ",".join(value) if isinstance(value, list) else value},
}

AXOLOTL_KEYS: dict[str, Move] = {
    # axolotl-ai-cloud/axolotl src/axolotl/utils/schemas/training.py HyperparametersConfig:
    # gradient_accumulation_steps, micro_batch_size, eval_batch_size, learning_rate, optimizer (transformers'
    # OptimizerNames, so the same values as TrainingArguments.optim).
    "training.per_device_train_batch_size": _same("micro_batch_size"),
    "training.gradient_accumulation_steps": _same("gradient_accumulation_steps"),
    "training.per_device_eval_batch_size": _same("eval_batch_size"),
    "training.learning_rate": _same("learning_rate"),
    "training.optim": _same("optimizer"),
    # schemas/config.py AxolotlInputConfig: bf16, fp16, gradient_checkpointing, save_only_model,
    # dataloader_num_workers, dataloader_pin_memory, sequence_len, sample_packing, and the attention
    # switches, of which "only one of xformers_attention, sdp_attention, s2_attention, flash_attention,
    # flex_attention must be set" (check_attention_fields). No eval_accumulation_steps key there.
    **{f"training.{name}": _same(name) for name in ("bf16", "fp16", "gradient_checkpointing", "save_only_model",
                                                     "dataloader_num_workers", "dataloader_pin_memory")},
    "training.eval_accumulation_steps": _no_key,
    "data.max_length": _same("sequence_len"),
    "data.packing": _same("sample_packing"),
    "model.attn_implementation": _table({"sdpa": {"sdp_attention": True, "flash_attention": False},
                                         "flash_attention_2": {"flash_attention": True, "sdp_attention": False}}),
    # integrations/liger/README.md: `plugins: [axolotl.integrations.liger.LigerPlugin]` and the liger_* flags
    # (liger/args.py LigerArgs). liger_rms_norm is left out: one release's validator refuses it without
    # tensor parallelism; the fused linear cross-entropy is the memory win.
    "training.use_liger_kernel": _only_true({"plugins": [LIGER_PLUGIN], "liger_rope": True,
                                             "liger_glu_activation": True,
                                             "liger_fused_linear_cross_entropy": True}),
    # schemas/peft.py LoraConfig: load_in_4bit needs `adapter: qlora` ("Require cfg.load_in_4bit to be True
    # for qlora"; the loader quantizes only `if self.cfg.adapter == "qlora" and self.cfg.load_in_4bit`),
    # and then uses nf4 with double quantization and the bf16/fp16 dtype by itself (loaders/model.py
    # bnb_config: bnb_4bit_quant_type "nf4", bnb_4bit_use_double_quant True, compute dtype cfg.torch_dtype).
    # The weights' dtype: left unmapped (no `A` for it) rather than guessed.
    "model.dtype": _no_key,
    "quantization.load_in_4bit": _only_true({"load_in_4bit": True, "adapter": "qlora"}),
    "quantization.load_in_8bit": _same("load_in_8bit"),
    "quantization.bnb_4bit_quant_type": lambda value: {} if value == "nf4" else None,
    "quantization.bnb_4bit_use_double_quant": lambda value: {} if value is True else None,
    "quantization.bnb_4bit_compute_dtype": _derived,
    "lora.r": _same("lora_r"),
    "lora.lora_alpha": _same("lora_alpha"),
    "lora.lora_dropout": _same("lora_dropout"),
    "lora.target_modules": lambda value: ({"lora_target_linear": True} if value == "all-linear"
                                          else {"lora_target_modules": value}),
}

KEYS = {LLAMAFACTORY: LLAMAFACTORY_KEYS, AXOLOTL: AXOLOTL_KEYS}


@dataclass(frozen=True)
class Spoken:
    """An advice change in a config's own words: what the panel shows, what `A` writes, or why it cannot."""

    change: dict[str, Any]
    fix: dict[str, Any] = field(default_factory=dict)
    """YAML key -> value (and `env.NAME` -> value) for the fixed copy; empty when `A` does not apply."""
    no_fix: str = ""


def speak(change: dict[str, Any], tool: str, config: str, command: list[str], python_name: Callable[[str], str]
          ) -> Spoken:
    """`change` (recipe keys) in `tool`'s YAML keys for `config`; `python_name` names a key with no YAML key."""
    base = os.path.basename(config)
    spoken: dict[str, Any] = {}
    fix: dict[str, Any] = {}
    missing: list[str] = []
    for dotted, value in change.items():
        if dotted.startswith("env."):
            spoken[dotted] = fix[dotted] = value
            continue
        move = KEYS[tool].get(dotted)
        keys = move(value) if move is not None else None
        if keys is None:
            missing.append(dotted.partition(".")[2])
            spoken[f"{python_name(dotted)} (no {TOOL_NAMES[tool]} key)"] = value
            continue
        for name, new in keys.items():
            merged = name in MERGED_LISTS
            spoken[f"{name} ({base}{', added' if merged else ''})"] = new[0] if merged and len(new) == 1 else new
            fix[name] = new
    return Spoken(spoken, *_applicable(fix, missing, tool, config, command))


def _applicable(fix: dict[str, Any], missing: list[str], tool: str, config: str, command: list[str]
                ) -> tuple[dict[str, Any], str]:
    """The fix, or no fix and the one-line reason `A` is not offered for it."""
    if not fix and not missing:
        return {}, ""
    if missing:
        return {}, f"A: {TOOL_NAMES[tool]} has no config key for {', '.join(missing)}; set it in your own code"
    if not config.lower().endswith(CONFIG_SUFFIXES[tool]):
        kinds = "YAML or JSON" if ".json" in CONFIG_SUFFIXES[tool] else "YAML"
        return {}, f"A rewrites {kinds} configs only; set these in {os.path.basename(config)} yourself"
    yaml_keys = [key for key in fix if not key.startswith("env.")]
    if not yaml_keys:
        return {}, "A: this changes only the environment; set it before the command and run it again"
    overridden = [key for key in yaml_keys if set_on_command_line(command, key)]
    if overridden:
        return {}, f"A: the command line sets {', '.join(overridden)} (over the config); change it there"
    return fix, ""


def set_on_command_line(command: list[str], key: str) -> bool:
    """Whether the command line overrides config `key` (`key=value` for LLaMA-Factory, `--key` for axolotl)."""
    return any(arg.startswith((f"{key}=", f"--{key}=")) or arg == f"--{key}" for arg in command[1:])
