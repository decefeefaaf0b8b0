"""Whether a recipe's `target_modules` name modules the model has, before peft is asked.

peft matches a list entry against a module's full name or a dotted suffix of it, and a string as a
regular expression over the full name; with no match it stops with a long traceback. The module names
come from the weights' names (a safetensors header or index lists them), so no model is built.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

TINY_LAYERS = 4
TINY_LAYER_MODULES = ("self_attn", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                      "self_attn.o_proj", "mlp", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "mlp.act_fn",
                      "input_layernorm", "post_attention_layernorm")
"""The embedded tiny model's modules per layer (a Qwen2: loratui/trainer/tiny.py)."""


def tiny_module_names() -> set[str]:
    """The embedded tiny model's module names, without building it."""
    names = {"model", "model.embed_tokens", "model.layers", "model.norm", "model.rotary_emb", "lm_head"}
    for i in range(TINY_LAYERS):
        names.add(f"model.layers.{i}")
        names.update(f"model.layers.{i}.{m}" for m in TINY_LAYER_MODULES)
    return names


def module_names(weight_names: Iterable[str]) -> set[str]:
    """Every module name the weights imply: each dotted prefix of each weight's name.

    `lm_head` is added: a model that ties it to the embeddings stores no weight for it, yet has it.
    """
    names = {"lm_head"}
    for weight in weight_names:
        parts = weight.split(".")
        names.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return names


def unmatched(targets: list[str] | str, names: set[str]) -> list[str]:
    """The targets no module matches, as peft matches them; [] when all match ("all-linear" always)."""
    if isinstance(targets, str):
        if targets == "all-linear":
            return []
        try:
            pattern = re.compile(targets)
        except re.error:
            return [targets]
        return [] if any(pattern.fullmatch(name) for name in names) else [targets]
    suffixes = {name.split(".", i)[-1] for name in names for i in range(name.count(".") + 1)}
    return [target for target in targets if target not in suffixes]


def meant_as_list(targets: list[str] | str, names: set[str]) -> bool:
    """A string that matches no full module name but names modules as a list entry would (`"q_proj"`):
    the user meant `["q_proj"]`."""
    return isinstance(targets, str) and bool(unmatched(targets, names)) and not unmatched([targets], names)


def leaf_names(names: set[str], limit: int = 16) -> str:
    """A short listing of the innermost modules' last names (q_proj, ...), for a message."""
    parents = {name.rsplit(".", 1)[0] for name in names if "." in name}
    leaves = sorted({name.rsplit(".", 1)[-1] for name in names - parents})
    shown = ", ".join(leaves[:limit])
    return shown + (", ..." if len(leaves) > limit else "")
