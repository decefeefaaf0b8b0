"""A TOML recipe turned into a validated, typed `Recipe`, or one clear `RecipeError`.

Section and key names are those of the libraries users already know: `[model]` (from_pretrained),
`[quantization]` (BitsAndBytesConfig), `[lora]` (LoraConfig), `[training]` (TrainingArguments),
plus `[data]` and `[monitor]` of our own. Pure logic: no torch, no transformers, no Textual.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

import msgspec

from loratui import bounds
from loratui.units import seconds

TINY_MODEL = "loratui:tiny"
"""The model path that names the embedded tiny Qwen2 model, built on first use (no download)."""
WATCHED = "loratui:watched"
"""Model path and dataset of a watched command's recipe copy (`loratui run -- COMMAND`): the command
brings its own. Until its Trainer records its live settings, the copy holds nothing else but [monitor]."""

BUILTIN_DIR = Path(__file__).resolve().parent / "recipes"
"""The recipes shipped inside the package (`loratui run tiny`); a clone's top-level `recipes/` links here."""
TINY_DATA = BUILTIN_DIR / "data" / "tiny-instructions.jsonl"
"""The shipped instruction set: the demo's data and the tiny model's tokenizer corpus."""

Dtype = Literal["auto", "bfloat16", "float16", "float32"]


class _Section(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """Base of the recipe sections: unknown keys are refused."""


class ModelSection(_Section, frozen=True):
    """`[model]`: what `AutoModelForCausalLM.from_pretrained` gets."""

    path: str = ""
    attn_implementation: Literal["sdpa", "eager", "flash_attention_2"] = "sdpa"
    dtype: Dtype = "bfloat16"
    trust_remote_code: bool = False
    revision: str | None = None


class QuantizationSection(_Section, frozen=True):
    """`[quantization]`: the `BitsAndBytesConfig` names."""

    load_in_4bit: bool = False
    load_in_8bit: bool = False
    bnb_4bit_quant_type: Literal["nf4", "fp4"] = "nf4"
    bnb_4bit_use_double_quant: bool = False
    bnb_4bit_compute_dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    bnb_4bit_quant_storage: Literal["uint8", "bfloat16", "float16", "float32"] = "uint8"


class LoraSection(_Section, frozen=True):
    """`[lora]`: the `LoraConfig` names."""

    r: int = 16
    lora_alpha: float = 32
    lora_dropout: float = 0.05
    target_modules: list[str] | str = "all-linear"
    bias: Literal["none", "all", "lora_only"] = "none"
    use_rslora: bool = False
    use_dora: bool = False
    modules_to_save: list[str] | None = None


class TrainingSection(_Section, frozen=True):
    """`[training]`: the `TrainingArguments` names users set for LoRA runs."""

    per_device_train_batch_size: int = 1
    per_device_eval_batch_size: int = 1
    gradient_accumulation_steps: int = 1
    gradient_checkpointing: bool = False
    learning_rate: float = 2e-4
    num_train_epochs: float = 1.0
    max_steps: int = -1
    lr_scheduler_type: str = "linear"
    warmup_ratio: float = 0.0
    warmup_steps: int = 0
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    optim: str = "adamw_torch"
    bf16: bool = False
    fp16: bool = False
    tf32: bool | None = None
    logging_steps: int = 1
    save_strategy: Literal["no", "steps", "epoch"] = "steps"
    save_steps: int = 500
    save_total_limit: int | None = None  # as TrainingArguments: keep every checkpoint
    save_only_model: bool = False
    eval_strategy: Literal["no", "steps", "epoch"] = "no"
    eval_steps: int | None = None
    eval_accumulation_steps: int | None = None
    dataloader_num_workers: int = 0
    dataloader_pin_memory: bool = True
    seed: int = 42
    data_seed: int | None = None
    torch_compile: bool = False
    use_cpu: bool = False
    output_dir: str | None = None
    neftune_noise_alpha: float | None = None
    use_liger_kernel: bool = False


class DataSection(_Section, frozen=True):
    """`[data]`: where the examples come from and how they become token ids."""

    path: str = ""
    dataset: str = ""
    split: str = "train"
    format: Literal["text", "instruction", "chat"] = "text"
    text_field: str = "text"
    instruction_field: str = "instruction"
    input_field: str = "input"
    output_field: str = "output"
    messages_field: str = "messages"
    max_length: int = 1024
    packing: bool = False
    eval_fraction: float = 0.0
    max_samples: int | None = None


class MonitorSection(_Section, frozen=True):
    """`[monitor]`: the VRAM warning line and the GPU sampler's rates."""

    warn_gb: float = 30.0
    sample_hz: float = 100.0
    record_hz: float = 10.0
    hang_factor: float = 10.0
    """A run with no step for this many times its median step interval (and an idle GPU) is hung..."""
    hang_min_s: float = 300.0
    """...and never sooner than this many seconds."""


ALERT_EVENTS = ("finished", "failed", "oom", "nan", "divergence", "hung", "over_line", "suspended", "guard",
                "time_limit")


class AlertsSection(_Section, frozen=True):
    """`[alerts]`: where the supervisor sends what happens. The URL is a secret, so the recipe (copied into
    the run directory) names only the environment variable that holds it; `--notify URL` passes it too."""

    url_env: str = ""
    format: Literal["auto", "ntfy", "json", "slack", "discord"] = "auto"
    events: list[str] = msgspec.field(default_factory=lambda: list(ALERT_EVENTS))
    min_interval_s: float = 60.0
    url: str = ""  # refused with a message saying where the URL goes instead


class GuardSection(_Section, frozen=True):
    """`[guard]`: opt-in recovery by the supervisor, at most `max_actions` times a run."""

    enabled: bool = False
    max_actions: int = 2
    on_oom: bool = True
    on_nan: bool = True
    """NaN/Inf loss or a diverging loss: restart from the checkpoint before the first bad step, lr halved."""
    max_retries: int = 2
    """Transient failures (a kill with no Python error, an NCCL timeout, an ECC or node error) retried from
    the last checkpoint with the recipe unchanged; counted apart from `max_actions`."""
    max_restart_gpu_hours: float = 0.0
    """GPU hours the restarted lives may spend in all (GPUs x wall hours since the first restart); 0: no cap."""


class DistributedSection(_Section, frozen=True):
    """`[distributed]`: several processes on one host, launched through torchrun (DDP or FSDP)."""

    num_processes: int | Literal["auto"] = 1
    strategy: Literal["ddp", "fsdp"] = "ddp"
    backend: Literal["auto", "nccl", "gloo"] = "auto"
    fsdp_sharding_strategy: Literal["FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD", "NO_SHARD"] = "FULL_SHARD"
    fsdp_auto_wrap_policy: Literal["TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"] = "TRANSFORMER_BASED_WRAP"
    fsdp_offload_params: bool = False
    fsdp_cpu_ram_efficient_loading: bool = True
    fsdp_use_orig_params: bool = False


class SlurmSection(_Section, frozen=True):
    """`[slurm]`: what a run inside a Slurm job does before the job's time limit (ignored outside Slurm)."""

    save_before_limit: str = ""
    """Save a checkpoint this long before the job's end time ("10m", "90s", "1h"); "" for none."""
    requeue: bool = False
    """After that checkpoint, exit and requeue the job: the requeued job resumes the same run from it."""


class Recipe(_Section, frozen=True):
    """A whole recipe."""

    model: ModelSection = ModelSection()
    quantization: QuantizationSection = QuantizationSection()
    lora: LoraSection = LoraSection()
    training: TrainingSection = TrainingSection()
    data: DataSection = DataSection()
    monitor: MonitorSection = MonitorSection()
    distributed: DistributedSection = DistributedSection()
    alerts: AlertsSection = AlertsSection()
    guard: GuardSection = GuardSection()
    slurm: SlurmSection = SlurmSection()


class RecipeError(Exception):
    """A recipe cannot be used; the message names the file, line and key and says what to do. A message
    that quotes a huge value (a 10 MB string) is cut in its middle: the place and the advice are kept."""

    def __init__(self, message: str = "") -> None:
        super().__init__(bounds.clip(str(message)))


KNOWN_OPTIMIZERS = frozenset({
    "adamw_torch", "adamw_torch_fused", "adamw_hf", "adafactor", "sgd", "adamw_8bit", "adamw_bnb_8bit",
    "paged_adamw_8bit", "paged_adamw_32bit", "paged_adamw", "adamw_torch_4bit", "lion_8bit",
    "paged_lion_8bit", "paged_lion_32bit", "rmsprop", "adagrad",
})
KNOWN_SCHEDULERS = frozenset({
    "linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup",
    "inverse_sqrt", "reduce_lr_on_plateau", "cosine_with_min_lr", "warmup_stable_decay",
})


def load_recipe(path: str | Path, text: str | None = None, *, model_path: str | None = None,
                max_steps: int | None = None, require_model: bool = True) -> Recipe:
    """Parse and validate the recipe at `path` (or `text`, named by `path`).

    `model_path` and `max_steps` are the command line's overrides (`--model-path`, `--max-steps`): they
    replace the recipe's values before the checks, so a recipe without `[model] path` is fine with
    `--model-path`, and the checks see what will run. `require_model=False` reads the record of a run
    that already started (an imported run has no command line to fill an empty `[model] path`).

    Raises:
        RecipeError: with one message naming file, line and key.
    """
    path = Path(path)
    if text is None:
        try:
            text = bounds.read_text(path)
        except FileNotFoundError:
            raise RecipeError(f"{path}: no such recipe file; check the path "
                              f"(or name a built-in recipe: {', '.join(builtin_recipes())})") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise RecipeError(f"{path}: cannot read the recipe ({getattr(exc, 'strerror', None) or exc})") from None
    text = text.removeprefix(bounds.BOM)  # an editor's UTF-8 byte order mark: TOML has no room for it, we do
    try:
        bounds.check_toml(text)
    except bounds.Refused as exc:
        raise RecipeError(f"{path}:{exc.line}: {exc.message}") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RecipeError(_twice(path, text, str(exc)) or f"{path}: not valid TOML: {exc}; fix the syntax at that "
                          "line") from None
    except (RecursionError, ValueError) as exc:  # what the bounds above should have caught already
        raise RecipeError(f"{path}: not a recipe loratui can read ({type(exc).__name__}); fix the file") from None
    if not raw:  # "no model given" sent the user to [model] path of a file that has nothing at all
        raise RecipeError(f"{path}: the recipe is empty (no [model], [data] or [training] table); start from an "
                          "example: `loratui init tiny NEW.toml` writes the built-in tiny recipe to edit (`loratui "
                          "recipes` lists the others)")
    try:
        recipe = msgspec.convert(raw, Recipe)
    except msgspec.ValidationError as exc:
        raise RecipeError(_explain_validation(path, text, str(exc), raw)) from None
    recipe = with_overrides(recipe, model_path, max_steps)
    problem = check_combinations(recipe, require_model)
    if problem:
        key, message = problem
        raise RecipeError(f"{where(path, text, key)}: `{key}`: {message}")
    return recipe


def with_overrides(recipe: Recipe, model_path: str | None = None, max_steps: int | None = None) -> Recipe:
    """The recipe with the command line's `--model-path` and `--max-steps` applied."""
    if model_path:
        recipe = msgspec.structs.replace(recipe, model=msgspec.structs.replace(recipe.model, path=model_path))
    if max_steps is not None:
        recipe = msgspec.structs.replace(
            recipe, training=msgspec.structs.replace(recipe.training, max_steps=max_steps))
    return recipe


def builtin_recipes() -> dict[str, Path]:
    """The shipped recipes by name (`tiny`, `qwen7b`, ...), sorted."""
    return {p.stem: p for p in sorted(BUILTIN_DIR.glob("*.toml"))}


def find_recipe(arg: str | Path) -> Path:
    """The recipe file `arg` names: an existing path, else a built-in recipe's name (`tiny` or `tiny.toml`).

    Raises:
        RecipeError: neither exists; the message lists the built-in names.
    """
    path = Path(arg)
    if path.exists():
        return path
    builtins = builtin_recipes()
    name = path.stem if path.suffix == ".toml" else path.name
    if len(path.parts) == 1 and name in builtins:
        return builtins[name]
    raise RecipeError(f"{arg}: no such recipe file, and no built-in recipe of that name; the built-ins are "
                      f"{', '.join(builtins)} (`loratui recipes` describes them, `loratui init NAME` copies "
                      "one out to edit)")


def recipe_hash(text: str) -> str:
    """A short, stable hash of a recipe's text, recorded in the log header."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def check_combinations(recipe: Recipe, require_model: bool = True) -> tuple[str, str] | None:
    """The first known-bad value or combination, as (dotted key, message), or None."""
    for check in _CHECKS:
        if check is _check_model and not require_model:
            continue
        problem = check(recipe)
        if problem:
            return problem
    return None


INT_LIMIT = 2**31 - 1
"""The largest integer any recipe key takes: beyond it torch and the tokenizers fail deep in C++."""
MAX_RANK = 4096
MAX_LENGTH = 1 << 20


def _check_numbers(r: Recipe) -> tuple[str, str] | None:
    """Every number finite and within a 32-bit integer: one message instead of a C++ trace later."""
    for section in Recipe.__struct_fields__:
        values = getattr(r, section)
        for key in values.__struct_fields__:
            value = getattr(values, key)
            if isinstance(value, bool):
                continue
            if isinstance(value, int) and abs(value) > INT_LIMIT:
                return f"{section}.{key}", f"{key} = {value}: too large (at most {INT_LIMIT}); check the value"
            if isinstance(value, float) and not math.isfinite(value):
                return f"{section}.{key}", f"{key} = {value}: must be a finite number"
    return None


def _check_model(r: Recipe) -> tuple[str, str] | None:
    if not r.model.path:
        return "model.path", "no model given: set [model] path = \"...\" or pass --model-path /path/to/model"
    return None


def _check_quantization(r: Recipe) -> tuple[str, str] | None:
    q = r.quantization
    if q.load_in_4bit and q.load_in_8bit:
        return ("quantization.load_in_8bit",
                "load_in_4bit and load_in_8bit are both true; choose one (bitsandbytes refuses both)")
    if r.training.fp16 and q.load_in_4bit and q.bnb_4bit_compute_dtype == "bfloat16":
        return ("training.fp16", "fp16 = true with bnb_4bit_compute_dtype = \"bfloat16\" mixes precisions "
                "(the grad scaler fails with 'Attempting to unscale FP16 gradients'); use bf16 = true, or set "
                "bnb_4bit_compute_dtype = \"float16\" on cards without bf16")
    return None


def _check_lora(r: Recipe) -> tuple[str, str] | None:
    lora = r.lora
    if lora.r <= 0:
        return "lora.r", f"r = {lora.r}: the LoRA rank must be a positive integer (8 to 128 is usual)"
    if lora.r > MAX_RANK:
        return "lora.r", (f"r = {lora.r}: a rank above {MAX_RANK} is wider than the layers it adapts; "
                          "8 to 128 is usual")
    if lora.lora_alpha <= 0:
        return "lora.lora_alpha", f"lora_alpha = {lora.lora_alpha}: must be positive (usually r or 2*r)"
    if not 0.0 <= lora.lora_dropout < 1.0:
        return "lora.lora_dropout", f"lora_dropout = {lora.lora_dropout}: must be in [0, 1) (0.05 is usual)"
    if isinstance(lora.target_modules, list) and not lora.target_modules:
        return "lora.target_modules", "target_modules is empty: name the projections, e.g. [\"q_proj\", \"v_proj\"]"
    return None


def _check_training(r: Recipe) -> tuple[str, str] | None:
    t = r.training
    positives = {
        "per_device_train_batch_size": t.per_device_train_batch_size,
        "per_device_eval_batch_size": t.per_device_eval_batch_size,
        "gradient_accumulation_steps": t.gradient_accumulation_steps,
        "logging_steps": t.logging_steps,
        "save_steps": t.save_steps,
    }
    for key, value in positives.items():
        if value < 1:
            return f"training.{key}", f"{key} = {value}: must be at least 1"
    if t.bf16 and t.fp16:
        return "training.fp16", "bf16 and fp16 are both true; choose one (bf16 where the card supports it)"
    if not 0.0 < t.learning_rate < 1.0:
        return "training.learning_rate", f"learning_rate = {t.learning_rate}: must be in (0, 1); LoRA uses 1e-4 to 3e-4"
    if not 0.0 <= t.warmup_ratio < 1.0:
        return "training.warmup_ratio", f"warmup_ratio = {t.warmup_ratio}: must be in [0, 1) (0.03 is usual)"
    if t.optim not in KNOWN_OPTIMIZERS:
        return "training.optim", f"optim = \"{t.optim}\" is not an optimizer loratui knows; use one of {_listing(KNOWN_OPTIMIZERS)}"
    if t.lr_scheduler_type not in KNOWN_SCHEDULERS:
        return ("training.lr_scheduler_type",
                f"lr_scheduler_type = \"{t.lr_scheduler_type}\" is unknown; use one of {_listing(KNOWN_SCHEDULERS)}")
    if t.max_steps < -1:
        return "training.max_steps", (f"max_steps = {t.max_steps}: use a positive number of steps, or -1 "
                                      "(the default) to train for num_train_epochs")
    if t.max_steps == 0 or t.num_train_epochs <= 0:
        return "training.max_steps", "nothing to train: set max_steps > 0 or num_train_epochs > 0"
    if t.output_dir is not None:
        return "training.output_dir", (f"output_dir = {t.output_dir!r}: checkpoints always go to the run "
                                       "directory (runs/<id>/checkpoints/), where suspend, resume and "
                                       "apply-advice find them; remove output_dir and copy a checkpoint "
                                       "from there when the run is done")
    if t.eval_strategy != "no" and r.data.eval_fraction <= 0:
        return ("training.eval_strategy", f"eval_strategy = \"{t.eval_strategy}\" but there is no eval data "
                "(the Trainer would stop with 'requires an eval_dataset'); set [data] eval_fraction = 0.05 "
                "or eval_strategy = \"no\"")
    return None


def _check_data(r: Recipe) -> tuple[str, str] | None:
    d = r.data
    if not d.path and not d.dataset:
        return "data.path", "no data given: set [data] path = \"file.jsonl\" (or dataset = \"name\")"
    if d.path and d.dataset:
        return "data.dataset", "both path and dataset are set in [data]; keep one"
    if not 8 <= d.max_length <= MAX_LENGTH:
        return "data.max_length", (f"max_length = {d.max_length}: use 8 to {MAX_LENGTH} tokens "
                                   "(512 to 4096 is usual)")
    if d.max_samples is not None and d.max_samples < 1:
        return "data.max_samples", f"max_samples = {d.max_samples}: must be at least 1 (or leave it out)"
    if not 0.0 <= d.eval_fraction < 0.5:
        return "data.eval_fraction", f"eval_fraction = {d.eval_fraction}: must be in [0, 0.5)"
    return None


def _check_monitor(r: Recipe) -> tuple[str, str] | None:
    m = r.monitor
    if m.warn_gb <= 0:
        return "monitor.warn_gb", f"warn_gb = {m.warn_gb}: the VRAM warning line must be positive (GB)"
    if not 0.5 <= m.record_hz <= m.sample_hz <= 1000:
        return ("monitor.sample_hz", f"sample_hz = {m.sample_hz}, record_hz = {m.record_hz}: need "
                "0.5 <= record_hz <= sample_hz <= 1000 (100 and 10 are the defaults)")
    return None


def _check_distributed(r: Recipe) -> tuple[str, str] | None:
    n = r.distributed.num_processes
    if isinstance(n, int) and not 1 <= n <= 64:
        return "distributed.num_processes", f"num_processes = {n}: use 1 to 64, or \"auto\" (one per visible GPU)"
    if r.distributed.strategy == "fsdp" and r.quantization.load_in_8bit:
        return "distributed.strategy", "FSDP cannot shard 8-bit bitsandbytes weights; use load_in_4bit (FSDP-QLoRA)"
    return None


def _check_alerts(r: Recipe) -> tuple[str, str] | None:
    a, g = r.alerts, r.guard
    if a.url:
        return ("alerts.url", "a webhook URL is a secret and the recipe is copied into the run directory; "
                "remove it, export it (export NTFY_URL=...) and set url_env = \"NTFY_URL\", or pass "
                "`loratui run --notify URL`")
    if a.url_env and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", a.url_env):
        if "://" in a.url_env or "/" in a.url_env:  # the URL itself, a secret: never repeated
            return ("alerts.url_env", "url_env takes the name of the environment variable that holds the URL, not "
                    "the URL (a secret: the recipe is copied into the run directory); export NTFY_URL=... and set "
                    "url_env = \"NTFY_URL\"")
        return ("alerts.url_env", f"url_env = {a.url_env!r}: not an environment variable's name; give one such as "
                "\"NTFY_URL\" (letters, digits and _)")
    unknown = [e for e in a.events if e not in ALERT_EVENTS]
    if unknown:
        return "alerts.events", f"unknown alert events {unknown}; use some of {', '.join(ALERT_EVENTS)}"
    if a.min_interval_s < 0:
        return "alerts.min_interval_s", f"min_interval_s = {a.min_interval_s}: must be 0 or more (seconds)"
    if not 0 <= g.max_actions <= 20:
        return "guard.max_actions", f"max_actions = {g.max_actions}: use 0 to 20 (2 is the default)"
    if not 0 <= g.max_retries <= 20:
        return "guard.max_retries", f"max_retries = {g.max_retries}: use 0 to 20 (2 is the default)"
    if not 0 <= g.max_restart_gpu_hours < 1e6:  # also refuses nan
        return ("guard.max_restart_gpu_hours", f"max_restart_gpu_hours = {g.max_restart_gpu_hours}: GPU hours, "
                "0 or more (0: no cap)")
    if r.monitor.hang_factor <= 1 or r.monitor.hang_min_s <= 0:
        return ("monitor.hang_factor", f"hang_factor = {r.monitor.hang_factor}, hang_min_s = "
                f"{r.monitor.hang_min_s}: need hang_factor > 1 and hang_min_s > 0 (10 and 300 are the defaults)")
    return None


def _check_slurm(r: Recipe) -> tuple[str, str] | None:
    limit = r.slurm.save_before_limit
    if limit and not (seconds(limit) or 0) > 0:
        return ("slurm.save_before_limit", f"save_before_limit = {limit!r}: give a duration such as \"10m\", "
                "\"90s\" or \"1h\" (how long before the job's time limit to save a checkpoint)")
    if r.slurm.requeue and not limit:
        return ("slurm.requeue", "requeue = true needs save_before_limit (the checkpoint the requeued job "
                "resumes from), e.g. save_before_limit = \"10m\"")
    return None


_CHECKS = (_check_numbers, _check_model, _check_quantization, _check_lora, _check_training, _check_data, _check_monitor,
           _check_distributed, _check_alerts, _check_slurm)


def _listing(names: frozenset[str]) -> str:
    return ", ".join(sorted(names))


_PATH_RE = re.compile(r"at `\$\.?([^`]*)`")
_UNKNOWN_RE = re.compile(r"unknown field `([^`]+)`")


def _explain_validation(path: Path, text: str, message: str, raw: Any = None) -> str:
    """Turn msgspec's message into ours: the dotted key, its line, its value, and what to do."""
    at = _PATH_RE.search(message)
    container = at.group(1) if at else ""
    unknown = _UNKNOWN_RE.search(message)
    if unknown:
        key = f"{container}.{unknown.group(1)}" if container else unknown.group(1)
        hint = _suggest(container, unknown.group(1))
        return f"{where(path, text, key)}: unknown key `{key}`{hint}; remove it or fix its spelling"
    detail = _PATH_RE.sub("", message).rstrip(" -")
    allowed = _allowed_values(container)
    if allowed:
        detail += f"; use one of: {allowed}"
    else:
        detail += _type_advice(message, container, raw)
    key = re.sub(r"\[\d+\]", "", container)  # `lora.target_modules[0]`'s line is target_modules'
    return f"{where(path, text, key)}: key `{container}`: {detail}"


_EXPECTED_RE = re.compile(r"Expected `([^`]+)`")
_WRITE = {"float": "write a number, without quotes", "int": "write a whole number, without quotes",
          "bool": "write true or false, without quotes", "str": "write text in double quotes",
          "array": "write a list in brackets", "str | array": "write text in double quotes, or a list of them"}


def _type_advice(message: str, dotted_key: str, raw: Any) -> str:
    """' (it is "fast"); write a number, without quotes, e.g. `learning_rate = 0.0002` (the default)' for a value of
    the wrong type: msgspec names the types only, which leaves the reader to guess what to write."""
    expected = _EXPECTED_RE.search(message)
    write = _WRITE.get(expected.group(1)) if expected else None
    if write is None:
        return ""
    value: Any = raw
    for part in re.findall(r"[^.\[\]]+", dotted_key):
        value = value[int(part)] if isinstance(value, list) and part.isdigit() else \
            value.get(part) if isinstance(value, dict) else None
    said = f" (it is {_toml(value)})" if value is not None else ""
    section, _, key = dotted_key.partition(".")
    struct = _SECTION_TYPES.get(section)
    default = getattr(struct(), key, None) if struct is not None and key in struct.__struct_fields__ else None
    example = f", e.g. `{key} = {_toml(default)}` (the default)" if default not in (None, "", [], ()) else ""
    return f"{said}; {write}{example}"


def _toml(value: Any) -> str:
    """A value as TOML writes it (`true`, `"fast"`, `["q_proj"]`), for messages."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return repr(value)


def _allowed_values(dotted_key: str) -> str:
    """The choices of a Literal-typed key, as 'a, b, c', or ''."""
    import typing

    section, _, key = dotted_key.partition(".")
    struct = _SECTION_TYPES.get(section)
    if struct is None or not key:
        return ""
    hint = typing.get_type_hints(struct).get(key)
    if typing.get_origin(hint) is typing.Literal:
        return ", ".join(f'"{v}"' for v in typing.get_args(hint))
    return ""


def _suggest(section: str, name: str) -> str:
    """'; did you mean X' when a known key of that section is close to `name`."""
    import difflib

    struct = _SECTION_TYPES.get(section)
    fields = struct.__struct_fields__ if struct else Recipe.__struct_fields__
    close = difflib.get_close_matches(name, fields, n=1)
    return f" (did you mean `{close[0]}`?)" if close else ""


_SECTION_TYPES: dict[str, Any] = {
    "model": ModelSection, "quantization": QuantizationSection, "lora": LoraSection,
    "training": TrainingSection, "data": DataSection, "monitor": MonitorSection,
    "distributed": DistributedSection, "alerts": AlertsSection, "guard": GuardSection,
}


def _twice(path: Path, text: str, said: str) -> str:
    """tomllib's "Cannot overwrite a value (at line 12, column 18)" for a key set twice in one table (an edit that
    added `dtype = "float16"` under [model], above its `dtype = "float32"`): both lines named, and what to do."""
    found = re.match(r"Cannot overwrite a value \(at line (\d+), column \d+\)", said)
    lines = text.splitlines()
    if not found or not 0 < int(found.group(1)) <= len(lines):
        return ""
    number = int(found.group(1))
    key = re.match(r"\s*([A-Za-z0-9_-]+)\s*=", lines[number - 1])
    if not key:
        return ""
    section = next((m.group(1) for line in reversed(lines[:number - 1])
                    if (m := re.match(r"^\s*\[\s*([^\]]+?)\s*\]", line))), "")
    dotted = f"{section}.{key.group(1)}" if section else key.group(1)
    first = find_key_line("\n".join(lines[:number - 1]), dotted)
    if first and not re.match(rf"\s*{re.escape(key.group(1))}\s*=", lines[first - 1]):
        first = None  # its table's line: the first one was set another way (a dotted key)
    lines_said = f"lines {first} and {number}" if first and first != number else f"line {number} repeats it"
    return f"{path}:{number}: `{dotted}` is set twice ({lines_said}); keep the one you mean"


def where(path: Path, text: str, dotted_key: str) -> str:
    """`file:line` for a dotted key (the key's line, else its section's), or just `file`."""
    line = find_key_line(text, dotted_key)
    return f"{path}:{line}" if line else str(path)


def find_key_line(text: str, dotted_key: str) -> int | None:
    """The 1-based line where `section.key` is set in TOML text (tomllib gives no positions)."""
    parts = dotted_key.split(".") if dotted_key else []
    if not parts:
        return None
    section, key = (parts[0], parts[1]) if len(parts) > 1 else ("", parts[0])
    current, section_line = "", None
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        header = re.match(r"^\[\s*([^\]]+?)\s*\]", stripped)
        if header:
            current = header.group(1)
            if current == section:
                section_line = number
            if not section and current == key:
                return number
            continue
        if current == section and re.match(rf"^{re.escape(key)}\s*=", stripped):
            return number
        if not section and current == "" and re.match(rf"^{re.escape(key)}\s*[=.]", stripped):
            return number
    return section_line
