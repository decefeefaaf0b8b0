"""The pre-flight VRAM estimate event, for a recipe run and for a watched command's live Trainer.

A watched script has no recipe: at train begin its live `TrainingArguments`, peft `LoraConfig`,
`BitsAndBytesConfig` and model config are read into the recipe they amount to (`live_recipe`), so the
estimate, and the advice, are computed exactly as for a recipe run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from loratui import events
from loratui.logic.command_keys import python_name
from loratui.recipe import (
    WATCHED,
    DataSection,
    LoraSection,
    ModelSection,
    QuantizationSection,
    Recipe,
    RecipeError,
    TrainingSection,
    check_combinations,
    load_recipe,
)
from loratui.units import GIB, size

ASSUMED_LENGTH = 1024
TRL_LENGTHS = ("max_completion_length", "max_prompt_length")
"""The lengths a TRL config caps with fields of its own where it has no max_length (GRPOConfig and RLOOConfig:
max_completion_length; older versions max_prompt_length too), in the order a memory move lowers them."""
"""The sequence length estimated at where neither the data nor the arguments give one (a guess, and said to be)."""
SCAN_EXAMPLES = 20000
"""How many examples of a watched script's dataset are measured for the longest one (the peak batch), at most."""
SCAN_S = 0.2
"""How long that measuring may take: it runs at train begin, before the script's first step, and a __getitem__ of
1 ms (a lazy transform) made 20,000 reads 24 s (BENCHMARKS.md). A dataset not read whole in time is sampled."""
_CHUNK = 64
"""Examples a `datasets` table reads at once (its transform runs per batch), between two looks at the clock."""


def record_estimate(emit: Callable[[events.AnyEvent], None], recipe: Any, model: Any, cuda: bool,
                    local_rank: int, seq_len: int, runtime: dict[str, Any] | None = None, how: str = "") -> None:
    """The pre-flight estimate for what actually runs: the recipe after fallbacks, at the data's length;
    `runtime`: what a watched trainer does unlike a recipe run (trainer/runtime.py); `how`: how `seq_len`
    was found, said with the figure.

    With short examples the batches never reach max_length, so the peak to check the live figure against
    is the one at the longest example; the max_length figure is what longer data would need.
    """
    import msgspec

    from loratui.logic.estimate import ConfigError, estimate
    from loratui.logic.priced_moves import shape_facts

    try:
        config = model.config.to_dict()
        total = None
        if cuda:
            import torch

            total = torch.cuda.get_device_properties(local_rank).total_memory / GIB
        at_data = msgspec.structs.replace(
            recipe, data=msgspec.structs.replace(recipe.data, max_length=seq_len))
        found = estimate(at_data, config, total, cuda=cuda, runtime=runtime)
        worst = estimate(recipe, config, total, cuda=cuda, runtime=runtime) \
            if seq_len < recipe.data.max_length else found
    except (ConfigError, AttributeError, KeyError, TypeError, ValueError) as exc:
        emit(events.Notice(t=time.time(), level="info", message=f"no VRAM estimate: {exc}"))
        return
    emit(events.Estimate(t=time.time(), peak_device_gib=found.peak_device_gib,
                         peak_reserved_gib=found.peak_reserved_gib, components=dict(found.components),
                         config=shape_facts(config), seq=seq_len, runtime=dict(runtime or {})))
    if worst is not found:
        emit(events.Notice(t=time.time(), level="info", key="estimate", message=(
            f"estimate at {how or 'the longest example'} ({seq_len} tokens): {size(found.peak_device_gib)}; at "
            f"max_length {recipe.data.max_length} it would be {size(worst.peak_device_gib)}")))
    elif how:  # a watched script: the notice said the length without the figure ("estimate at 32 tokens")
        emit(events.Notice(t=time.time(), level="info", key="estimate",
                           message=f"estimate at {seq_len} tokens ({how}): {size(found.peak_device_gib)}"))


# -- a watched script's live settings -------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """An enum's value, a torch dtype's name, a set as a sorted list; other values as they are."""
    import enum

    if isinstance(value, enum.Enum):
        value = value.value
    if type(value).__name__ == "dtype":
        return str(value).removeprefix("torch.")
    if isinstance(value, (set, frozenset, tuple)):
        return sorted(str(v) for v in value)
    return value


def _fields(section: type, source: Any, getter: Callable[[Any, str], Any]) -> dict[str, Any]:
    """The fields of a recipe section that `source` has, with a usable value."""
    out = {}
    for name in section.__struct_fields__:  # type: ignore[attr-defined]
        value = _plain(getter(source, name))
        if value is not None and isinstance(value, (bool, int, float, str, list)):
            out[name] = value
    return out


def config_lengths(args: Any) -> dict[str, int] | None:
    """The length fields the script's config really has, with their values (`{"GRPOConfig.max_completion_length":
    512}`), where it has no max_length of its own (the live recipe's max_length is then assumed or measured, not a
    setting it reads); None where it has one, or none of TRL's."""
    import dataclasses

    if not dataclasses.is_dataclass(args):
        return None
    names = {f.name for f in dataclasses.fields(args)}
    if names & {"max_length", "max_seq_length"} or not names & set(TRL_LENGTHS):
        return None
    values = {name: getattr(args, name, None) for name in TRL_LENGTHS if name in names}
    return {f"{type(args).__name__}.{name}": value for name, value in values.items()
            if isinstance(value, int) and not isinstance(value, bool) and value > 0}


def _get(source: Any, name: str) -> Any:
    if isinstance(source, dict):
        return source.get(name)
    return getattr(source, name, None)


def _section(section: type, values: dict[str, Any]) -> Any:
    """The section from the values it accepts; a value it refuses (a newer choice) keeps the default."""
    import msgspec

    kept: dict[str, Any] = {}
    for name, value in values.items():
        try:
            msgspec.convert({**kept, name: value}, section)
        except msgspec.ValidationError:
            continue
        kept[name] = value
    return msgspec.convert(kept, section)


def live_recipe(args: Any, model: Any, seq_len: int, max_length: int | None, warn_gb: float) -> Recipe:
    """The recipe a live Trainer amounts to (its model, LoRA, quantisation, TrainingArguments)."""
    import msgspec

    config = model.config
    quant = _get(config, "quantization_config")
    peft = next(iter((getattr(model, "peft_config", None) or {}).values()), None)
    training = _fields(TrainingSection, args, _get)
    base = getattr(model, "get_base_model", lambda: model)()
    # Checkpointing enabled on the model (LLaMA-Factory does so) leaves TrainingArguments' flag False.
    # transformers 5 renamed the model's flag (the old name warns, and goes in v6).
    on_model = getattr(base, "is_activation_checkpointing", None)
    if on_model is None:
        on_model = getattr(base, "is_gradient_checkpointing", False)
    training["gradient_checkpointing"] = bool(getattr(args, "gradient_checkpointing", False) or on_model)
    # The script's own output_dir; eval data is the script's too (a recipe's eval needs [data] eval_fraction).
    for name in ("output_dir", "eval_strategy", "eval_steps"):
        training.pop(name, None)
    model_values = {"path": str(getattr(config, "_name_or_path", "") or "live model"),
                    "attn_implementation": getattr(config, "_attn_implementation", None) or "sdpa",
                    "dtype": _plain(getattr(base, "dtype", None)) or "bfloat16"}
    if quant is not None:  # the unquantised layers' dtype (k-bit loading keeps them in compute dtype)
        model_values["dtype"] = _plain(_get(quant, "bnb_4bit_compute_dtype")) or model_values["dtype"]
    recipe = Recipe(
        model=_section(ModelSection, model_values),
        quantization=_section(QuantizationSection, _fields(QuantizationSection, quant, _get)) if quant
        else QuantizationSection(),
        lora=_section(LoraSection, _fields(LoraSection, peft, _get)) if peft is not None else LoraSection(),
        training=_section(TrainingSection, training),
        data=DataSection(dataset=WATCHED, max_length=max(max_length or seq_len, 8),
                         packing=bool(getattr(args, "packing", False))),
    )
    return msgspec.structs.replace(recipe, monitor=msgspec.structs.replace(recipe.monitor, warn_gb=warn_gb))


def recipe_text(recipe: Recipe, command: str) -> str:
    """The live recipe as TOML, checked by the same loader as any recipe (RecipeError if it does not pass)."""
    import msgspec

    from loratui.text import inert

    command = inert(command[:200], newlines=False)  # one comment line, whatever the arguments hold
    lines = [f"# The live settings of `{command}` at train begin, as loratui read them from its",
             "# TrainingArguments, LoraConfig and BitsAndBytesConfig. loratui does not run this file.", ""]
    for name, section in msgspec.structs.asdict(recipe).items():
        if name == "distributed":
            continue
        lines.append(f"[{name}]")
        for key, value in msgspec.structs.asdict(section).items():
            if value is not None:  # TOML has no null: the default stands
                lines.append(f"{key} = {_toml(value)}")
        lines.append("")
    text = "\n".join(lines)
    problem = check_combinations(recipe)
    if problem is not None:  # named as the script sets it: this text is loratui's, not a file the user wrote
        key, message = problem
        raise RecipeError(f"{python_name(key)}: {message}")
    load_recipe("recipe.toml", text)
    return text


def _toml(value: Any) -> str:
    import json

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)  # numbers, and strings (JSON escapes are valid TOML basic strings)


def padded_length(collator: Any, seq_len: int, max_length: int | None) -> int:
    """The length a batch is padded to: the longest example, max_length for padding="max_length", rounded
    up to the collator's pad_to_multiple_of (the Trainer may wrap the script's collator)."""
    collator = getattr(collator, "data_collator", collator)
    if getattr(collator, "padding", None) == "max_length":
        seq_len = int(getattr(collator, "max_length", None) or max_length or seq_len)
    multiple = getattr(collator, "pad_to_multiple_of", None)
    if isinstance(multiple, int) and multiple > 1:
        seq_len = -(-seq_len // multiple) * multiple
    return seq_len


def longest_example(args: Any, dataset: Any) -> tuple[int, int | None, str]:
    """(the longest example's length, the configured max_length if any, how it was found).

    The collator pads a batch to its longest example, so that is the peak batch's length. The script's dataset is
    read in an order spread over its whole length (`_spread`) for SCAN_S at most: a dataset read whole gives its
    longest example, a slow one the longest of a sample, and says so.
    """
    max_length = _get(args, "max_length") or _get(args, "max_seq_length")
    max_length = int(max_length) if isinstance(max_length, int) and max_length > 0 else None
    longest, how = 0, ""
    try:
        total = len(dataset)
        read, longest = _longest_in_time(dataset, _spread(total, min(total, SCAN_EXAMPLES)))
        how = "the longest example" if read == total else f"the longest of a sample of {read} of the {total} examples"
    except (TypeError, KeyError, IndexError, AttributeError, ValueError):
        longest = 0
    if not longest and max_length:
        return max_length, max_length, "no tokenised dataset to measure: assumed max_length"
    if not longest:  # GRPO's GRPOConfig, a plain TrainingArguments: no max_length to assume
        return ASSUMED_LENGTH, None, f"no tokenised dataset to measure and no max_length set: assumed {ASSUMED_LENGTH}"
    return min(longest, max_length or longest), max_length, how


_GOLDEN = 0.6180339887498949


def _spread(total: int, count: int) -> list[int]:
    """`count` distinct indices of `total`, in an order whose every prefix is spread over the whole range (the golden
    ratio's sequence): a sample the clock cuts short still reaches the dataset's end. No random draw: the script's
    generators are its own."""
    if count >= total:
        return sorted(range(total), key=lambda i: (i * _GOLDEN) % 1.0)
    seen: dict[int, None] = {}  # ordered, each index once
    k = 0
    while len(seen) < count:
        seen.setdefault(int(total * ((k * _GOLDEN) % 1.0)), None)
        k += 1
    return list(seen)


def _longest_in_time(dataset: Any, order: list[int]) -> tuple[int, int]:
    """(how many examples were read, the longest one's length), reading in `order` until SCAN_S has passed."""
    deadline = time.perf_counter() + SCAN_S
    table = hasattr(dataset, "column_names") and "input_ids" in dataset.column_names
    read = longest = 0
    for start in range(0, len(order), _CHUNK if table else 1):
        if table:  # a `datasets` table: one batch a read (its transform runs per batch)
            lengths = [len(ids) for ids in dataset[order[start:start + _CHUNK]]["input_ids"]]
        else:
            lengths = [len(dataset[order[start]]["input_ids"])]
        read, longest = read + len(lengths), max([longest, *lengths])
        if time.perf_counter() > deadline:
            break
    return read, longest


__all__ = ["RecipeError", "live_recipe", "longest_example", "padded_length", "recipe_text", "record_estimate"]
