"""How the trainer in this process really trains, read from its live objects, for the VRAM estimate.

A recipe run trains the way trainer/build.py builds it. A watched script's trainer may not: TRL's
`SFTTrainer` leaves the weights it did not quantise in bf16, casts QLoRA adapters to bf16 and replaces the
model's forward with a fused LM head that never builds the logits (measured on an H200: 9.27 GiB where the
recipe model said 21.67); liger or unsloth replace the model's forward; a script's own `compute_loss` keeps
what it likes. `read_runtime` returns the estimator's overrides (logic/estimate.RUNTIME_KEYS) or, where the
live objects cannot tell what the loss keeps, the reason, so the hook says so instead of giving a number.
"""

from __future__ import annotations

from typing import Any

KNOWN_LOSS_MODULES = ("transformers.", "trl.", "llamafactory.", "axolotl.")
"""Trainers whose compute_loss ends in the model's own loss or TRL's fused head (read from their source)."""
SFT_LOSS_MODULE = "trl.trainer.sft_trainer"
"""The one TRL loss measured (bench/watched_estimate_h200.jsonl). TRL's other trainers run other forwards than
the recipe model's one: a DPO batch is twice per_device_train_batch_size and has a reference forward too
(trl/trainer/dpo_trainer.py, `batch is [chosen, rejected]`), GRPO and RLOO generate before they score, and
distillation runs a teacher; a figure modelled as SFT would be a wrong number said as a measured one."""
TRL_OBJECTIVES = {
    "dpo_trainer": "scores each pair's chosen and rejected completions in one batch, twice "
                   "per_device_train_batch_size, and runs a reference forward besides",
    "grpo_trainer": "generates its completions (with a KV cache) before it scores them",
    "rloo_trainer": "generates its completions (with a KV cache) before it scores them",
}


def read_runtime(trainer: Any, model: Any) -> tuple[dict[str, Any], str | None]:
    """(the estimator's overrides, None) or ({}, why the memory of the loss cannot be known)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    why = _unknown_loss(trainer, base)
    if why:
        return {}, why
    # TRL scores label smoothing on the model's full logits (its fused head then only feeds the metrics)
    smoothing = getattr(trainer, "label_smoother", None) is not None
    facts: dict[str, Any] = {"loss": "chunked" if _fused_lm_head(base) and not smoothing else "logits"}
    if facts["loss"] == "chunked":
        facts["liger"] = False  # TRL turns liger's fused cross-entropy off for its own head
    elif _forward_module(base).startswith("liger_kernel"):
        facts["liger"] = True  # liger patched the model's forward (Trainer, LLaMA-Factory, axolotl)
    embeddings = getattr(base.get_input_embeddings(), "weight", None)
    quantised = getattr(base, "is_loaded_in_4bit", False) or getattr(base, "is_loaded_in_8bit", False)
    if embeddings is not None and quantised:
        facts["upcast"] = str(embeddings.dtype) == "torch.float32"
    trainable = next((p for p in model.parameters() if p.requires_grad), None)
    if trainable is not None:
        facts["lora_bytes"] = int(trainable.element_size())
    return facts, None


def _fused_lm_head(base: Any) -> bool:
    """TRL's add_fused_lm_head binds its `_fused_forward` on the model instance."""
    forward = base.__dict__.get("forward")
    code = getattr(getattr(forward, "__func__", forward), "__code__", None)
    return code is not None and code.co_name == "_fused_forward"


def _forward_module(base: Any) -> str:
    forward = base.__dict__.get("forward") or type(base).forward
    return str(getattr(getattr(forward, "__func__", forward), "__module__", "") or "")


def _unknown_loss(trainer: Any, base: Any) -> str | None:
    """Why the loss's memory cannot be modelled, or None when it can."""
    module = _forward_module(base)
    if module.startswith(("unsloth", "cut_cross_entropy")):
        return (f"the model's forward is {module.split('.')[0]}'s (its own fused loss and checkpointing), "
                "which loratui has not measured")
    if trainer is None:
        return None
    if getattr(trainer, "compute_loss_func", None) is not None:
        return "the script passes its own compute_loss_func, so what the loss keeps is the script's"
    method = getattr(type(trainer), "compute_loss", None)
    owner = str(getattr(method, "__module__", "") or "")
    objective = _trl_objective(type(trainer))
    if objective:
        return f"{objective}; loratui's estimate models TRL's SFTTrainer only"
    if method is not None and not owner.startswith(KNOWN_LOSS_MODULES):
        name = getattr(method, "__qualname__", "compute_loss")
        return (f"{name} (in {owner or 'the script'}) computes the loss its own way, so what it keeps is "
                "the script's")
    return None


def _trl_objective(cls: type) -> str:
    """What the TRL trainer `cls` is, or subclasses (LLaMA-Factory's and axolotl's DPO trainers subclass TRL's), trains
    on unlike SFTTrainer ('' for SFTTrainer, its plain subclasses, or no TRL trainer)."""
    trl = next((c for c in cls.__mro__ if str(c.__module__).startswith("trl.")
                and not str(c.__module__).endswith("base_trainer")), None)
    if trl is None or trl.__module__ == SFT_LOSS_MODULE:
        return ""
    what = next((said for part, said in TRL_OBJECTIVES.items() if str(trl.__module__).endswith(part)),
                "trains on more than SFTTrainer's one forward of the batch")
    name = cls.__name__ if cls is trl else f"{cls.__name__} (TRL's {trl.__name__})"
    return f"{name} {what}"
