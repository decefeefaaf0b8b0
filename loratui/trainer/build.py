"""Model, tokenizer, quantisation and LoRA from a recipe, with visible fallbacks where the box can't serve.

Every fallback (flash-attention missing, 4-bit without a usable bitsandbytes, liger kernels without
liger-kernel or CUDA, bf16/fp16 or a paged optimizer without CUDA) is a `Notice` in the log, never a
silent change.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from loratui.recipe import TINY_MODEL, Recipe


@dataclass
class Resolved:
    """The recipe after fallbacks for this machine, and what changed."""

    recipe: Recipe
    cuda: bool
    notices: list[tuple[str, str]] = field(default_factory=list)  # (key, message)


def resolve_for_machine(recipe: Recipe, cuda: bool) -> Resolved:
    """Apply the fallbacks this machine needs; each becomes a notice naming the recipe key."""
    out = Resolved(recipe, cuda)
    model, quant, training = recipe.model, recipe.quantization, recipe.training
    if model.attn_implementation == "flash_attention_2" and not (
            cuda and importlib.util.find_spec("flash_attn")):
        why = "flash_attn is not installed" if cuda else "there is no CUDA device"
        out.notices.append(("model.attn_implementation", f"flash_attention_2 unavailable ({why}); using sdpa"))
        model = msgspec.structs.replace(model, attn_implementation="sdpa")
    if (quant.load_in_4bit or quant.load_in_8bit) and not _bnb_usable():
        out.notices.append(("quantization.load_in_4bit",
                            "bitsandbytes cannot be imported here; loading unquantised (more VRAM)"))
        quant = msgspec.structs.replace(quant, load_in_4bit=False, load_in_8bit=False)
    if training.use_liger_kernel and not (cuda and importlib.util.find_spec("liger_kernel")):
        # liger's kernels are Triton: CUDA only. Without them the logits take their full size again.
        why = "liger-kernel is not installed (pip install liger-kernel)" if cuda else "there is no CUDA device"
        out.notices.append(("training.use_liger_kernel",
                            f"liger kernels unavailable: {why}; training without them (more VRAM)"))
        training = msgspec.structs.replace(training, use_liger_kernel=False)
    if not cuda:
        training = _cpu_training(training, out.notices)
    out.recipe = msgspec.structs.replace(recipe, model=model, quantization=quant, training=training)
    return out


def _bnb_usable() -> bool:
    try:
        import bitsandbytes  # noqa: F401
    except Exception:  # bitsandbytes raises assorted errors when its native library cannot load
        return False
    return True


def _cpu_training(training: Any, notices: list[tuple[str, str]]) -> Any:
    changes: dict[str, Any] = {}
    if training.fp16:
        notices.append(("training.fp16", "fp16 needs CUDA; training in float32 on the CPU"))
        changes["fp16"] = False
    if training.optim.startswith("paged_") or "8bit" in training.optim:
        notices.append(("training.optim", f"{training.optim} needs CUDA; using adamw_torch on the CPU"))
        changes["optim"] = "adamw_torch"
    if training.optim == "adamw_torch_fused":
        changes["optim"] = "adamw_torch"
    if training.tf32:
        changes["tf32"] = None
    changes["use_cpu"] = True
    return msgspec.structs.replace(training, **changes)


def resolve_model_path(path: str, base_dir: Path) -> str:
    """A local directory or a hub id; `loratui:tiny` is built into the cache on first use."""
    if path == TINY_MODEL:
        from loratui.trainer.tiny import ensure_tiny_model

        return str(ensure_tiny_model())
    local = Path(path).expanduser()
    if not local.is_absolute() and (base_dir / local).exists():
        local = base_dir / local
    return str(local) if local.exists() else path


def torch_dtype(name: str) -> Any:
    """torch dtype of a recipe dtype name ('auto' stays a string)."""
    import torch

    return name if name == "auto" else getattr(torch, name)


def load_model(recipe: Recipe, model_path: str, cuda: bool, local_rank: int = 0) -> Any:
    """The base model, quantised as the recipe asks, prepared for k-bit training and wrapped by peft."""
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    quant, model_cfg, lora = recipe.quantization, recipe.model, recipe.lora
    kwargs: dict[str, Any] = {
        "dtype": torch_dtype(model_cfg.dtype), "attn_implementation": model_cfg.attn_implementation,
        "trust_remote_code": model_cfg.trust_remote_code,
    }
    if model_cfg.revision:
        kwargs["revision"] = model_cfg.revision
    quantised = quant.load_in_4bit or quant.load_in_8bit
    if quantised:
        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=quant.load_in_4bit, load_in_8bit=quant.load_in_8bit,
            bnb_4bit_quant_type=quant.bnb_4bit_quant_type,
            bnb_4bit_use_double_quant=quant.bnb_4bit_use_double_quant,
            bnb_4bit_compute_dtype=torch_dtype(quant.bnb_4bit_compute_dtype),
            bnb_4bit_quant_storage=torch_dtype(quant.bnb_4bit_quant_storage)
            if quant.bnb_4bit_quant_storage != "uint8" else None,
        )
    kwargs["device_map"] = {"": local_rank} if cuda else {"": "cpu"}
    model = AutoModelForCausalLM.from_pretrained(model_path, **kwargs)
    model.config.use_cache = False  # the KV cache is useless in training and costs memory
    gc = recipe.training.gradient_checkpointing
    if quantised:
        model = prepare_model_for_kbit_training(
            model, use_gradient_checkpointing=gc, gradient_checkpointing_kwargs={"use_reentrant": False})
    elif gc:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    # LoraConfig annotates lora_alpha as int but scales by it as a float: a recipe may say 16 or 16.5.
    config = LoraConfig(r=lora.r, lora_alpha=lora.lora_alpha, lora_dropout=lora.lora_dropout,  # type: ignore[arg-type]
                        target_modules=lora.target_modules, bias=lora.bias, use_rslora=lora.use_rslora,
                        use_dora=lora.use_dora, modules_to_save=lora.modules_to_save, task_type="CAUSAL_LM")
    return get_peft_model(model, config)


def load_tokenizer(model_path: str, recipe: Recipe) -> Any:
    """The model's tokenizer, with a pad token (eos when the model has none)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path, trust_remote_code=recipe.model.trust_remote_code)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def training_arguments(recipe: Recipe, output_dir: str, max_steps: int | None) -> Any:
    """`TrainingArguments` from `[training]`, mapped onto what the installed transformers accepts."""
    from transformers import TrainingArguments

    fields = {f.name for f in dataclasses.fields(TrainingArguments)}
    values = msgspec.structs.asdict(recipe.training)
    values["output_dir"] = values.get("output_dir") or output_dir
    if max_steps is not None:
        values["max_steps"] = max_steps
    ratio = values.pop("warmup_ratio")
    if ratio:
        # transformers 5 dropped warmup_ratio and reads a fractional warmup_steps as a ratio.
        if "warmup_ratio" in fields:
            values["warmup_ratio"] = ratio
        elif not values["warmup_steps"]:
            values["warmup_steps"] = ratio
    if values.get("eval_steps") is None:
        values.pop("eval_steps", None)
    values.update(report_to="none", disable_tqdm=True, remove_unused_columns=False,
                  logging_strategy="steps", save_safetensors=True,
                  # a NaN step loss must reach the log as NaN, not be replaced by the running mean
                  logging_nan_inf_filter=False)
    # load_model already enabled checkpointing on the base model (non-reentrant); the Trainer must not
    # enable it a second time, and transformers 5 warns on the old argument name.
    values.pop("gradient_checkpointing")
    if values.get("tf32") is None:
        values.pop("tf32", None)
    values.update(_distributed_arguments(recipe))
    kwargs = {k: v for k, v in values.items() if k in fields}
    return TrainingArguments(**kwargs)


def _distributed_arguments(recipe: Recipe) -> dict[str, Any]:
    """DDP backend and FSDP settings, by the names accelerate and TrainingArguments use."""
    dist = recipe.distributed
    out: dict[str, Any] = {}
    if dist.backend != "auto":
        out["ddp_backend"] = dist.backend
    if dist.strategy == "fsdp":
        wrap = " auto_wrap" if dist.fsdp_auto_wrap_policy != "NO_WRAP" else ""
        offload = " offload" if dist.fsdp_offload_params else ""
        out["fsdp"] = f"{dist.fsdp_sharding_strategy.lower()}{wrap}{offload}"
        out["fsdp_config"] = {
            "auto_wrap_policy": dist.fsdp_auto_wrap_policy,
            "cpu_ram_efficient_loading": dist.fsdp_cpu_ram_efficient_loading,
            "use_orig_params": dist.fsdp_use_orig_params,
        }
    else:
        # LoRA leaves most parameters frozen: DDP must not wait for gradients that never come.
        out["ddp_find_unused_parameters"] = False
    return out


def count_parameters(model: Any) -> tuple[int, int]:
    """(all parameters, trainable parameters); 4-bit weights count as their unpacked size."""
    total = trainable = 0
    for param in model.parameters():
        n = param.numel()
        if param.__class__.__name__ == "Params4bit":
            n *= 2
        total += n
        if param.requires_grad:
            trainable += n
    return total, trainable
