"""Predict the VRAM peak of a LoRA/QLoRA run from its recipe and the model's config.json (no weights).

Pure logic: no torch, no transformers, no I/O. It models the path loratui/trainer/build.py takes
(from_pretrained with BitsAndBytesConfig, prepare_model_for_kbit_training, get_peft_model, the HF
Trainer under bf16 autocast) term by term, and reports the figure that decides OOM: device memory used as
NVML shows it, beside torch's peak reserved. The few constants that cannot be derived (allocator slack,
CUDA context) were fitted to the H200 grid in bench/estimate_grid.jsonl, and the context and the slack's base refitted
with the small models of bench/estimate_small.jsonl (an H100); see BENCHMARKS.md.

A watched script's trainer may train differently (TRL's SFTTrainer keeps the weights it did not quantise
in bf16, casts LoRA to bf16 and never builds the logits): what the live objects say overrides those
choices through `RUNTIME_KEYS` (trainer/runtime.py reads them).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from loratui.units import GIB

KNOWN_ARCHITECTURES = frozenset({"qwen2", "llama", "mistral", "qwen3", "gemma2", "phi3"})
"""Decoders whose layer structure (q/k/v/o + gate/up/down, RMSNorm, RoPE) this model was measured on: the first three
calibrated it (bench/estimate_grid.jsonl, H200); Qwen3, Gemma-2 and Phi-3 (fused qkv/gate_up) were held out, measured
after the estimate was fixed, on an H100, and fell within 7 % of it (bench/estimate_holdout.jsonl), as did
Llama-3-8B's 128k vocabulary."""
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

# NVML "used" beyond torch reserved: the idle driver reservation (0.47 GiB on the H100, 0.60-0.72 on the H200 as
# measured), the CUDA context and cuBLAS/NCCL memory outside the caching allocator (about 0.74 GiB on both). 1.40 was
# fitted on the H200 grid alone; 1.26 is the least-squares fit over it, the H100 rows of the held-out architectures and
# the small grid's FIT half (bench/estimate_small_fit.py, BENCHMARKS.md "The estimator on small models").
CONTEXT_GIB = 1.26
# Uncertainty stated for the two kinds of estimate (fraction of the device-used peak).
KNOWN_UNCERTAINTY, GENERIC_UNCERTAINTY = 0.10, 0.25


class ConfigError(ValueError):
    """A config.json that lacks what the estimate needs; the message names the keys."""


@dataclass(frozen=True)
class Dims:
    """The dimensions of a decoder that memory depends on."""

    model_type: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    qkv_bias: bool
    known: bool


@dataclass(frozen=True)
class Setup:
    """The recipe's memory-relevant choices, flattened."""

    batch: int
    seq: int
    quant: str  # "none", "nf4", "fp4", "int8"
    double_quant: bool
    weight_bytes: int  # bytes per parameter of unquantised weights
    rank: int
    targets: tuple[str, ...]
    dropout: bool
    checkpointing: bool
    optim: str
    attn: str
    liger: bool = False  # training.use_liger_kernel: fused linear cross-entropy, SwiGLU, RMSNorm kernels
    upcast: bool | None = None  # unquantised weights (so the residual stream) in fp32; None: as k-bit loading
    lora_bytes: int = 4  # bytes per LoRA parameter (peft keeps fp32; TRL casts QLoRA adapters to bf16)
    loss: str = "logits"  # "logits": the model's own cross-entropy; "chunked": TRL's fused LM head, no logits


RUNTIME_KEYS = ("upcast", "lora_bytes", "loss", "liger")
"""The Setup fields a live trainer's facts may override (the `runtime` of an Estimate event)."""


def with_runtime(s: Setup, runtime: dict[str, Any] | None) -> Setup:
    """`s` with what the live trainer was seen to do instead of what a recipe run would do."""
    known = {k: v for k, v in (runtime or {}).items() if k in RUNTIME_KEYS}
    return _replace(s, **known) if known else s


def fp32_residual(s: Setup) -> bool:
    """Whether the layers see fp32 inputs: 4-bit loading upcast by prepare_model_for_kbit_training."""
    return s.quant != "none" and (s.upcast is None or s.upcast)


def no_logits(s: Setup) -> bool:
    """Whether the loss never materialises the (tokens x vocab) logits (liger, TRL's fused LM head)."""
    return s.liger or s.loss == "chunked"


@dataclass(frozen=True)
class Estimate:
    """The predicted peak (GiB), its breakdown, and whether it fits the card."""

    peak_device_gib: float
    peak_reserved_gib: float
    peak_allocated_gib: float
    components: dict[str, float]
    gpu_gib: float | None
    fits: bool | None
    headroom_gib: float | None
    uncertainty: float
    notes: tuple[str, ...] = field(default_factory=tuple)

    def as_json(self) -> dict[str, Any]:
        """The `--json` shape of the CLI."""
        return {"peak_device_gib": round(self.peak_device_gib, 2),
                "peak_reserved_gib": round(self.peak_reserved_gib, 2),
                "components": {k: round(v, 3) for k, v in self.components.items()},
                "fits": self.fits,
                "headroom_gib": None if self.headroom_gib is None else round(self.headroom_gib, 2)}


# --------------------------------------------------------------------------- reading the inputs

_ALIASES = {
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "num_attention_heads": ("num_attention_heads", "n_head"),
    "vocab_size": ("vocab_size",),
}


def read_dims(config: dict[str, Any]) -> Dims:
    """The decoder dimensions of a parsed config.json.

    Raises:
        ConfigError: naming the keys that are missing.
    """
    if "text_config" in config and "hidden_size" not in config:  # multimodal wrappers nest the decoder
        config = {**config["text_config"], "model_type": config["text_config"].get("model_type", "")}
    named = {key: next((a for a in names if config.get(a)), None) for key, names in _ALIASES.items()}
    missing = [key for key, name in named.items() if name is None]
    if missing:
        raise ConfigError(f"config.json lacks {', '.join(missing)}; cannot size the model "
                          "(is it a decoder-only language model's config?)")

    def dim(name: str, default: int = 0) -> int:  # the key as the file spells it (n_embd), the default where absent
        return _whole(name, config[name]) if config.get(name) else default

    hidden, heads = dim(named["hidden_size"]), dim(named["num_attention_heads"])  # type: ignore[arg-type]
    head_dim = dim("head_dim") or _whole("head_dim (hidden_size / num_attention_heads)", hidden // heads)
    model_type = str(config.get("model_type", ""))
    return Dims(model_type=model_type, hidden=hidden,
                intermediate=dim("intermediate_size") or dim("n_inner") or 4 * hidden,
                layers=dim(named["num_hidden_layers"]), heads=heads,  # type: ignore[arg-type]
                kv_heads=dim("num_key_value_heads") or heads, head_dim=head_dim,
                vocab=dim(named["vocab_size"]),  # type: ignore[arg-type]
                tied=bool(config.get("tie_word_embeddings", False)),
                qkv_bias=model_type == "qwen2" or bool(config.get("attention_bias", False)),
                known=model_type in KNOWN_ARCHITECTURES)


def _whole(key: str, value: Any) -> int:
    """A dimension of config.json as a positive whole number; anything else is the config's fault, said as such (a
    `"hidden_size": "big"` ended `estimate` as an internal error with a traceback file)."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)  # int() took it before
    whole = isinstance(value, int) or isinstance(value, float) and math.isfinite(value) and value.is_integer()
    if isinstance(value, bool) or not whole or value < 1:
        shown = json.dumps(value)
        raise ConfigError(f"{key} is {shown if len(shown) <= 40 else shown[:39] + '…'}, not a positive whole "
                          "number; fix it in config.json (it sizes the model)")
    return int(value)


def _regex_targets(pattern: str) -> tuple[str, ...]:
    """The projections a string target matches: peft reads it as a regex over full module names (not as
    one name: tuple("q_proj") would be its letters)."""
    try:
        compiled = re.compile(pattern)
    except re.error:
        return ()
    return tuple(p for p in PROJECTIONS
                 if any(compiled.fullmatch(f"model.layers.0.{block}.{p}") for block in ("self_attn", "mlp")))


def read_setup(recipe: Any) -> Setup:
    """The memory-relevant choices of a `loratui.recipe.Recipe`."""
    q, lora, t = recipe.quantization, recipe.lora, recipe.training
    quant = q.bnb_4bit_quant_type if q.load_in_4bit else ("int8" if q.load_in_8bit else "none")
    targets = PROJECTIONS if lora.target_modules == "all-linear" else (
        _regex_targets(lora.target_modules) if isinstance(lora.target_modules, str) else tuple(lora.target_modules))
    return Setup(batch=t.per_device_train_batch_size, seq=recipe.data.max_length, quant=quant,
                 double_quant=q.bnb_4bit_use_double_quant,
                 weight_bytes=4 if recipe.model.dtype == "float32" else 2, rank=lora.r, targets=targets,
                 dropout=lora.lora_dropout > 0, checkpointing=t.gradient_checkpointing, optim=t.optim,
                 attn=recipe.model.attn_implementation, liger=t.use_liger_kernel)


# --------------------------------------------------------------------------- static memory


def linear_shapes(d: Dims) -> dict[str, tuple[int, int]]:
    """(in, out) features of each projection of one decoder layer."""
    q_out, kv_out = d.heads * d.head_dim, d.kv_heads * d.head_dim
    return {"q_proj": (d.hidden, q_out), "k_proj": (d.hidden, kv_out), "v_proj": (d.hidden, kv_out),
            "o_proj": (q_out, d.hidden), "gate_proj": (d.hidden, d.intermediate),
            "up_proj": (d.hidden, d.intermediate), "down_proj": (d.intermediate, d.hidden)}


def lora_parameters(d: Dims, s: Setup) -> int:
    """Trainable LoRA parameters: r * (in + out) for each targeted projection of each layer."""
    shapes = linear_shapes(d)
    return d.layers * sum(s.rank * (i + o) for name, (i, o) in shapes.items() if name in s.targets)


def _quant_bytes_per_param(s: Setup) -> float:
    """Bytes per weight of a bitsandbytes-quantised linear, quantisation constants included."""
    if s.quant == "int8":
        return 1.0 + 4 / 4096  # one fp32 scale per output row, roughly
    # 4 bits, one fp32 absmax per block of 64; double quant makes it 8-bit plus an fp32 per 256 blocks
    return 0.5 + (1 / 64 + 4 / (64 * 256) if s.double_quant else 4 / 64)


def base_weights(d: Dims, s: Setup) -> dict[str, float]:
    """Bytes of the frozen model: quantised linears, and what stays unquantised."""
    linear = d.layers * sum(i * o for i, o in linear_shapes(d).values())
    embeddings = d.vocab * d.hidden * (1 if d.tied else 2)
    small = d.layers * 2 * d.hidden + d.hidden  # RMSNorm weights
    if d.qkv_bias:
        small += d.layers * (d.heads + 2 * d.kv_heads) * d.head_dim
    if s.quant == "none":
        return {"weights_16bit": (linear + embeddings + small) * s.weight_bytes}
    if not fp32_residual(s):  # loaded in the compute dtype and left there (TRL, LLaMA-Factory)
        return {"weights_quantized": linear * _quant_bytes_per_param(s),
                "weights_16bit": (embeddings + small) * 2}
    # prepare_model_for_kbit_training upcasts every non-quantised parameter to fp32
    return {"weights_quantized": linear * _quant_bytes_per_param(s), "weights_fp32_upcast": (embeddings + small) * 4}


_OPTIMIZER_BYTES = {  # state bytes per trainable parameter; (torch-visible, managed/paged)
    "adamw_torch": (8, 0), "adamw_torch_fused": (8, 0), "adamw_hf": (8, 0), "adamw_8bit": (2, 0),
    "adamw_bnb_8bit": (2, 0), "paged_adamw_8bit": (0, 2), "paged_adamw_32bit": (0, 8), "paged_adamw": (0, 8),
    "adamw_torch_4bit": (1, 0), "lion_8bit": (1, 0), "paged_lion_8bit": (0, 1), "paged_lion_32bit": (0, 4),
    "rmsprop": (4, 0), "adagrad": (4, 0), "sgd": (0, 0), "adafactor": (0.1, 0),
}


_PARAM_DTYPE_STATES = frozenset({"adamw_torch", "adamw_torch_fused", "adamw_hf", "rmsprop", "adagrad"})
"""torch's optimizers keep their moments in the parameter's dtype (bitsandbytes' keep their own)."""


def optimizer_states(trainable: int, optim: str, lora_bytes: int = 4) -> tuple[float, float]:
    """(bytes torch counts, bytes of CUDA managed memory torch does not count) of the optimizer."""
    visible, paged = _OPTIMIZER_BYTES.get(optim, (8, 0))
    if optim in _PARAM_DTYPE_STATES or optim not in _OPTIMIZER_BYTES:
        visible = visible * lora_bytes / 4
    return trainable * visible, trainable * paged


# --------------------------------------------------------------------------- activations


def layer_activation_bytes(d: Dims, s: Setup) -> float:
    """Bytes one decoder layer keeps for backward, per token, without checkpointing.

    Counted from what autograd saves under bf16 autocast: the fp32 RMSNorm inputs, each LoRA branch's
    dropout mask and bf16 input copy, the attention inputs/outputs, and the MLP's gate/up/SiLU tensors.
    """
    quantised = fp32_residual(s)
    per_input = 3 if s.dropout else 2  # bf16 copy saved by lora_A, plus a 1-byte dropout mask
    shapes = linear_shapes(d)
    lora = sum(per_input * shapes[n][0] + 2 * s.rank for n in s.targets if n in shapes)
    q_width, kv_width = d.heads * d.head_dim, d.kv_heads * d.head_dim
    norms = 2 * 4 * d.hidden  # each RMSNorm keeps its input upcast to fp32
    attention = 2 * q_width + 2 * 2 * kv_width + 2 * q_width + 4 * d.heads
    # bnb's Linear4bit returns its input's dtype: fp32 residual stream in => fp32 gate/up out.
    # Saved: gate and up outputs and SiLU's output; liger's SwiGLU keeps gate and up only and
    # recomputes the rest in backward.
    mlp = (8 if quantised else 4) * d.intermediate if s.liger else (12 if quantised else 6) * d.intermediate
    if s.attn == "eager":  # softmax output in fp32 and its bf16 cast, over the whole sequence
        attention += d.heads * s.seq * 6 + 2 * 2 * (q_width - kv_width)
    return norms + lora + attention + mlp


def logits_bytes(d: Dims) -> float:
    """Bytes per token at the loss: bf16 logits, their fp32 upcast, log-softmax output and its gradient."""
    return LOGITS_BYTES_PER_VOCAB * d.vocab


LOGITS_BYTES_PER_VOCAB = 12


def activations(d: Dims, s: Setup) -> dict[str, float]:
    """Bytes of activations at the peak: the layers' saved tensors and the loss's logits."""
    tokens = s.batch * s.seq
    logits = loss_bytes(d, s, tokens)
    if not s.checkpointing:
        return {"activations": tokens * d.layers * layer_activation_bytes(d, s), "logits": logits}
    # Non-reentrant checkpointing keeps each layer's input (fp32 under QLoRA's upcast embeddings).
    kept = tokens * d.layers * (4 if fp32_residual(s) else 2) * d.hidden
    recomputed = tokens * layer_activation_bytes(d, s)
    if no_logits(s):  # no logits to wait for: the recomputed layer adds to the kept inputs (fitted, slack in)
        return {"activations": kept + LIGER_RECOMPUTED * recomputed, "logits": logits}
    # The loss's logits and one recomputed layer are alive at different moments, so only the larger counts.
    return {"activations": kept + max(recomputed - logits, 0.0), "logits": logits}


def loss_bytes(d: Dims, s: Setup, tokens: int) -> float:
    """Bytes the loss holds: the logits, or under liger the fused cross-entropy's working set.

    Liger's fused linear cross-entropy never materialises the logits (it walks the tokens in small
    chunks); what stays is one vocab x hidden bf16 buffer. Under QLoRA both paths also keep autocast's
    bf16 copy of the fp32 lm_head for the input gradient. The liger terms were fitted on the two QLoRA +
    checkpointing runs of bench/throughput_h200.jsonl and hold on the bf16 and no-checkpointing ones.
    """
    lm_head_copy = 2.0 * d.vocab * d.hidden if fp32_residual(s) else 0.0
    if s.loss == "chunked":
        return chunked_loss_bytes(d, s, tokens)
    if s.liger:
        return 2.0 * d.vocab * d.hidden + lm_head_copy
    return logits_bytes(d) * tokens + lm_head_copy


def chunked_loss_bytes(d: Dims, s: Setup, tokens: int) -> float:
    """TRL's fused LM head (trl/kernels/chunked_logprob.py): logits only ever as one tile.

    It projects at most CHUNK_TOKENS tokens x CHUNK_VOCAB vocabulary entries at a time into one bf16 tile,
    keeps the scored hidden states for its backward and accumulates their gradient in fp32; an fp32 lm_head
    is cast one vocabulary chunk at a time.
    """
    vocab_chunk = min(d.vocab, CHUNK_VOCAB)
    tile = 2.0 * min(tokens, CHUNK_TOKENS) * vocab_chunk
    hidden = tokens * d.hidden * ((4 if fp32_residual(s) else 2) + 4)
    head_cast = 2.0 * vocab_chunk * d.hidden if fp32_residual(s) else 0.0
    return tile + hidden + head_cast


CHUNK_TOKENS, CHUNK_VOCAB = 4096, 32768
"""TRL's tile (TOKEN_CHUNK_SIZE, _CHUNKED_LOGPROB_CHUNK_SIZE in trl 1.16)."""


LIGER_RECOMPUTED = 0.87
"""Share of one recomputed layer's saved tensors at the peak under liger (fitted; slack included)."""


def allocator_slack(d: Dims, s: Setup, layer_activations: float, allocated: float) -> float:
    """Bytes torch reserves beyond what it allocated at the peak (fitted on the H200 grid and the small models).

    Freed fp32-logits blocks and, under checkpointing, one recomputed layer's blocks stay cached but
    cannot serve the next differently-sized requests; without checkpointing fragmentation grows with the
    activations themselves. The base share is SLACK_BASE_SHARE of the `allocated` peak up to SLACK_BASE: a run
    that allocates little leaves little cached (the tiny recipe: 0.01 GiB, not 0.5).
    """
    tokens = s.batch * s.seq
    base = slack_base(allocated)
    if no_logits(s):  # no logits blocks; the recomputed layer's slack is inside LIGER_RECOMPUTED
        return base + (0.0 if s.checkpointing else SLACK_PER_ACTIVATION * layer_activations)
    slack = base + SLACK_PER_LOGITS_BLOCK * 4 * d.vocab * tokens
    if s.checkpointing:
        return slack + SLACK_PER_RECOMPUTED_LAYER * tokens * layer_activation_bytes(d, s)
    return slack + SLACK_PER_ACTIVATION * layer_activations


def slack_base(allocated: float) -> float:
    """The slack that does not come from one freed block (bytes): a share of the allocated peak, at most SLACK_BASE."""
    return min(SLACK_BASE, SLACK_BASE_SHARE * allocated)


SLACK_BASE, SLACK_PER_LOGITS_BLOCK = 0.5 * GIB, 0.38
SLACK_PER_RECOMPUTED_LAYER, SLACK_PER_ACTIVATION = 1.05, 0.027
SLACK_BASE_SHARE = 0.145
"""Fitted with CONTEXT_GIB (bench/estimate_small_fit.py) on the small grid's FIT half and the large-model rows; the cap
SLACK_BASE binds from 3.4 GiB allocated, so runs above that keep the H200 grid's base."""


# --------------------------------------------------------------------------- the estimate


def estimate(recipe: Any, model_config: dict[str, Any], gpu_gib: float | None = None,
             cuda: bool = True, runtime: dict[str, Any] | None = None) -> Estimate:
    """Predict the peak of `recipe` training the model of `model_config` (a parsed config.json);
    `cuda=False` for a CPU run (no CUDA context, no caching allocator's slack); `runtime`: what a live
    trainer was seen to do (RUNTIME_KEYS) where it differs from a recipe run.

    Raises:
        ConfigError: when the config lacks the dimensions the estimate needs.
    """
    return estimate_setup(read_dims(model_config), with_runtime(read_setup(recipe), runtime), gpu_gib, cuda)


def estimate_setup(d: Dims, s: Setup, gpu_gib: float | None = None, cuda: bool = True) -> Estimate:
    """The estimate for already-read dimensions and choices (the fit table varies `s`)."""
    bytes_ = components_bytes(d, s)
    if not cuda:  # the CPU allocator caches no blocks, and a CPU process holds no CUDA context
        bytes_["allocator_slack"] = 0.0
    allocated = sum(v for k, v in bytes_.items() if k not in ("optimizer_paged", "allocator_slack"))
    reserved = allocated + bytes_["allocator_slack"]
    context = CONTEXT_GIB if cuda else 0.0
    device = reserved + bytes_["optimizer_paged"] + context * GIB
    components = {k: v / GIB for k, v in bytes_.items()}
    if cuda:
        components["cuda_context_non_torch"] = CONTEXT_GIB
    headroom = None if gpu_gib is None else gpu_gib - device / GIB
    return Estimate(peak_device_gib=device / GIB, peak_reserved_gib=reserved / GIB,
                    peak_allocated_gib=allocated / GIB, components=components, gpu_gib=gpu_gib,
                    fits=None if headroom is None else headroom >= 0, headroom_gib=headroom,
                    uncertainty=KNOWN_UNCERTAINTY if d.known else GENERIC_UNCERTAINTY,
                    notes=tuple(_notes(d, s)))


def components_bytes(d: Dims, s: Setup) -> dict[str, float]:
    """Every term of the peak, in bytes, in the order the CLI prints them."""
    trainable = lora_parameters(d, s)
    visible, paged = optimizer_states(trainable, s.optim, s.lora_bytes)
    acts = activations(d, s)
    lora = trainable * float(s.lora_bytes)  # gradients take their parameter's dtype
    out = base_weights(d, s) | {"lora_params": lora, "gradients": lora,
                                "optimizer_states": float(visible), "optimizer_paged": float(paged)}
    out |= acts
    allocated = sum(v for k, v in out.items() if k != "optimizer_paged")
    out["allocator_slack"] = allocator_slack(d, s, acts["activations"], allocated)
    return out


def _notes(d: Dims, s: Setup) -> list[str]:
    """What the estimate assumed that the user should know."""
    notes = []
    if not d.known:
        notes.append(f"architecture {d.model_type or '(unnamed)'!r} was not measured; estimated as a generic "
                     f"llama-like decoder, uncertainty ±{GENERIC_UNCERTAINTY:.0%}")
    missing = [t for t in s.targets if t not in PROJECTIONS]
    if missing:
        notes.append(f"target_modules {missing} are not llama-style projection names; their LoRA weights "
                     "are not counted")
    if s.quant == "int8":
        notes.append("8-bit loading was not measured; its activations are counted like 4-bit's")
    if s.attn == "flash_attention_2":
        notes.append("flash_attention_2 counted like sdpa (flash_attn was not on the calibration machine)")
    if s.loss == "chunked":
        notes.append("TRL's fused LM head: the loss never builds the logits (one tile at a time)")
    elif s.liger:
        notes.append("assumes liger-kernel is installed where it trains (without it loratui turns the "
                     "kernels off, with a notice, and the logits take their full size)")
    if s.optim not in _OPTIMIZER_BYTES:
        notes.append(f"optimizer {s.optim!r} unknown; counted as AdamW with two fp32 moments")
    return notes


# --------------------------------------------------------------------------- what would fit

FIT_BATCHES = (1, 2, 4, 8, 16, 32)
FIT_SEQS = (512, 1024, 2048, 4096, 8192)


@dataclass(frozen=True)
class FitRow:
    """For one way of loading and training: the largest batch that fits at each sequence length."""

    label: str
    max_batch: dict[int, int]  # sequence length -> largest batch that fits (0: none)


def fit_table(recipe: Any, model_config: dict[str, Any], gpu_gib: float) -> list[FitRow]:
    """Largest batch per sequence length on a `gpu_gib` card, with/without checkpointing and 4-bit."""
    d, base = read_dims(model_config), read_setup(recipe)
    rows = []
    for quant in ("nf4", "none"):
        for checkpointing in (True, False):
            s = _replace(base, quant=quant, checkpointing=checkpointing,
                         double_quant=base.double_quant or quant != base.quant)
            label = f"{'4-bit nf4' if quant == 'nf4' else 'bf16'}, checkpointing {'on' if checkpointing else 'off'}"
            label += ", liger" if base.liger else ""
            rows.append(FitRow(label, {seq: _largest_batch(d, s, seq, gpu_gib) for seq in FIT_SEQS}))
    return rows


def _largest_batch(d: Dims, s: Setup, seq: int, gpu_gib: float) -> int:
    """The largest of FIT_BATCHES whose estimate fits `gpu_gib` at `seq` tokens (0 when none does)."""
    best = 0
    for batch in FIT_BATCHES:
        if estimate_setup(d, _replace(s, batch=batch, seq=seq)).peak_device_gib > gpu_gib:
            break
        best = batch
    return best


def _replace(s: Setup, **changes: Any) -> Setup:
    """A copy of `s` with `changes`."""
    import dataclasses

    return dataclasses.replace(s, **changes)
