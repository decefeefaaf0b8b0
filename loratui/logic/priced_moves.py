"""Every memory move priced with the estimator for this run's model and data.

A move that sounds right can still miss the line: under a 32 GiB budget a 7B bf16 LoRA at batch 1 x 2048
without checkpointing (38 GiB) ran at 30.9 GiB with liger kernels (fits the card, not the 30 GiB line) and
about 22.5 GiB with checkpointing. So each move (and, when no single one is enough, pairs and triples of
them) is run through `estimate_setup`, and the proposals are ordered: those predicted to land under the
line first, cheapest in speed first; then the rest, lowest peak first.

Pure logic: the model's shape comes from the `Estimate` event (its `config`), never from a file.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from typing import Any

from loratui.logic.estimate import (
    ConfigError,
    Setup,
    estimate_setup,
    no_logits,
    read_dims,
    read_setup,
    with_runtime,
)

_SHAPE_KEYS = ("model_type", "hidden_size", "n_embd", "d_model", "num_hidden_layers", "n_layer", "num_layers",
               "num_attention_heads", "n_head", "vocab_size", "intermediate_size", "n_inner",
               "num_key_value_heads", "head_dim", "tie_word_embeddings", "attention_bias")
"""The config.json keys the estimate reads (what the trainer records beside its estimate)."""

MIN_SAVING = 0.01
"""A move is offered only when it is predicted to save at least this share of the peak: "use_liger_kernel:
predicted peak 1.90 GiB (now 1.90)" saves nothing (a tiny model's logits), and an offer must help."""
TRUNCATION_COST = 1.0
"""Cutting max_length changes what is trained, not only how fast: it ranks after every speed cost."""


@dataclass(frozen=True)
class PricedMove:
    """One move (or a few together), its predicted peak and its known speed cost."""

    text: str
    change: dict[str, Any]
    peak_gib: float
    now_gib: float
    cost: float
    """Fraction of speed lost (0.3: about 30% fewer tokens/s); TRUNCATION_COST when data is cut."""
    cost_text: str
    fits: bool

    def describe(self) -> str:
        """'<move>: predicted peak X GiB (now Y); <speed cost>'."""
        digits = 1 if self.now_gib >= 10 else 2  # a small model's moves differ in the second decimal
        return (f"{self.text}: predicted peak {self.peak_gib:.{digits}f} GiB (now {self.now_gib:.{digits}f}); "
                f"{self.cost_text}")


@dataclass(frozen=True)
class _Option:
    text: str
    change: dict[str, Any]
    setup: dict[str, Any]
    cost: float
    cost_text: str


def shape_facts(config: dict[str, Any]) -> dict[str, Any]:
    """The few config.json keys the estimate needs (kept small enough for the event log)."""
    if "text_config" in config and "hidden_size" not in config:
        config = {**config["text_config"], "model_type": config["text_config"].get("model_type", "")}
    return {k: config[k] for k in _SHAPE_KEYS if isinstance(config.get(k), (int, float, str, bool))}


def price_moves(recipe: Any, config: dict[str, Any], line_gib: float, seq: int = 0,
                env: dict[str, str] | None = None, max_combined: int = 3,
                runtime: dict[str, Any] | None = None) -> list[PricedMove]:
    """Every move for `recipe` on the model of `config`, at `seq` tokens (default: max_length), for a
    trainer that does what `runtime` says (a watched one's Estimate.runtime).

    Returns [] when the config cannot be sized. Fitting proposals come first, cheapest first.
    """
    try:
        dims = read_dims(config)
    except ConfigError:
        return []
    base = with_runtime(read_setup(recipe), runtime)
    if seq:
        base = dataclasses.replace(base, seq=seq)
    now = estimate_setup(dims, base).peak_device_gib
    dimensions = [d for d in _dimensions(recipe, base, env or {}, now, dims) if d]
    found: list[PricedMove] = []
    for size in range(1, max_combined + 1):
        for group in itertools.combinations(dimensions, size):
            for options in itertools.product(*group):
                found.append(_price(dims, base, options, now, line_gib))
        if any(m.fits and now - m.peak_gib >= MIN_SAVING * now for m in found):
            break
    found = [m for m in found if now - m.peak_gib >= MIN_SAVING * now]
    found.sort(key=lambda m: (not m.fits, m.cost if m.fits else m.peak_gib, m.peak_gib))
    return _unique(found)


def _price(dims: Any, base: Setup, options: tuple[_Option, ...], now: float, line_gib: float) -> PricedMove:
    setup, change = base, {}
    for option in options:
        setup = dataclasses.replace(setup, **option.setup)
        change.update(option.change)
    peak = estimate_setup(dims, setup).peak_device_gib
    if any("env.PYTORCH_CUDA_ALLOC_CONF" in o.change for o in options):
        peak -= _slack_gib(dims, setup) - 0.5  # freed blocks of other sizes become usable again
    return PricedMove(text=" + ".join(o.text for o in options), change=change, peak_gib=peak, now_gib=now,
                      cost=sum(o.cost for o in options), cost_text="; ".join(o.cost_text for o in options),
                      fits=peak <= line_gib)


def _slack_gib(dims: Any, setup: Setup) -> float:
    return estimate_setup(dims, setup).components.get("allocator_slack", 0.0)


def _unique(moves: list[PricedMove]) -> list[PricedMove]:
    seen, out = set(), []
    for move in moves:
        key = tuple(sorted((k, repr(v)) for k, v in move.change.items()))
        if key not in seen:
            seen.add(key)
            out.append(move)
    return out


def _dimensions(recipe: Any, s: Setup, env: dict[str, str], now: float, dims: Any) -> list[list[_Option]]:
    """Each kind of move with its possible values; a combination takes at most one value of each."""
    t = recipe.training
    out: list[list[_Option]] = []
    if not no_logits(s):  # liger saves the logits; a loss that never builds them gains nothing
        out.append([_Option("use_liger_kernel = true", {"training.use_liger_kernel": True}, {"liger": True}, 0.0,
                            "about the same speed (7B QLoRA on an H200: 5662 vs 6094 tokens/s, within noise; "
                            "needs `pip install liger-kernel`)")])
    if s.optim in ("adamw_torch", "adamw_torch_fused", "adamw_hf", "paged_adamw_32bit", "paged_adamw"):
        out.append([_Option(f"optim {s.optim} -> paged_adamw_8bit", {"training.optim": "paged_adamw_8bit"},
                            {"optim": "paged_adamw_8bit"}, 0.02, "about the same speed (8-bit states; with "
                            "checkpointing a known NaN source)")])
    out.append(_batch_options(t.per_device_train_batch_size, t.gradient_accumulation_steps))
    if not s.checkpointing:
        out.append([_Option("gradient_checkpointing = true", {"training.gradient_checkpointing": True},
                            {"checkpointing": True}, 0.30, "~30% slower (recomputes the forward; 7B QLoRA + "
                            "liger on an H200: 5662 vs 8806 tokens/s)")])
    if s.quant == "none":
        compute = "float16" if t.fp16 else "bfloat16"
        out.append([_Option("load_in_4bit (QLoRA, NF4 + double quant)",
                            {"quantization.load_in_4bit": True, "quantization.bnb_4bit_quant_type": "nf4",
                             "quantization.bnb_4bit_use_double_quant": True,
                             "quantization.bnb_4bit_compute_dtype": compute},
                            {"quant": "nf4", "double_quant": True}, 0.30,
                            "~30% slower (dequantises every matmul; 7B on an H200: 5662 vs 8109 tokens/s)")])
    out.append(_length_options(recipe.data.max_length, s.seq))
    if "expandable_segments" not in env.get("PYTORCH_CUDA_ALLOC_CONF", "") and _slack_gib(dims, s) >= 1.0:
        out.append([_Option("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                            {"env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}, {}, 0.0,
                            "same speed (less fragmentation; the saving is the estimate's allocator slack)")])
    return out


def _batch_options(batch: int, accum: int) -> list[_Option]:
    """Halvings of the micro-batch, accumulation raised so the effective batch stays."""
    options, new, halvings = [], batch // 2, 1
    while new >= 1:
        new_accum = -(-batch * accum // new)
        options.append(_Option(
            f"per_device_train_batch_size {batch} -> {new}, gradient_accumulation_steps {accum} -> {new_accum} "
            f"(effective batch {batch * accum} -> {new * new_accum})",
            {"training.per_device_train_batch_size": new, "training.gradient_accumulation_steps": new_accum},
            {"batch": new}, 0.10 * halvings, f"~{10 * halvings}% slower (smaller matmuls; same effective batch)"))
        new, halvings = new // 2, halvings + 1
    return options


def _length_options(max_length: int, seq: int) -> list[_Option]:
    """Halvings of max_length down to 512 (examples longer than it are cut)."""
    options, new = [], max_length // 2
    while new >= 512 and new < seq:
        options.append(_Option(f"max_length {max_length} -> {new}", {"data.max_length": new}, {"seq": new},
                               TRUNCATION_COST, f"faster, but examples longer than {new} tokens are cut"))
        new //= 2
    return options


def first_fitting(moves: list[PricedMove]) -> PricedMove | None:
    """The proposal to make: the cheapest move predicted to land under the line, or None."""
    return next((m for m in moves if m.fits), None)
