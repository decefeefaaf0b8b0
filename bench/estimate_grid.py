"""Measure the VRAM peak of LoRA/QLoRA training over a grid of configs, for calibrating `loratui estimate`.

Standalone on purpose (torch, transformers, peft, bitsandbytes, pynvml only; no loratui), so it runs on a
bare GPU box. For each model it builds a random-init bf16 checkpoint offline in a child process, then
measures every config of that model in a fresh child: load as loratui's trainer/build.py does
(from_pretrained + BitsAndBytesConfig, prepare_model_for_kbit_training with non-reentrant checkpointing,
get_peft_model), train a few optimizer steps with the HF Trainer on random tokens, and record the NVML
device-used peak (a 100 Hz sampler thread) beside torch's peak reserved/allocated. One JSON line per config
is appended to --out as soon as it finishes, so a run cut short still leaves data.

    python3 bench/estimate_grid.py --out $OUT/estimate_grid.jsonl --budget 500 --models q05,q7,l13

Children are forked from a parent that has imported torch/transformers but never touched CUDA (saving
~15 s of imports per config); if CUDA was initialised in the parent anyway, children are spawned instead.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path


GIB = 1024**3
DEVICE: int | str = 0  # "cpu" only for a smoke test of the script itself

# Real dimensions of public models (random weights give the same memory figures).
MODELS: dict[str, dict] = {
    "q05": dict(model_type="qwen2", hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                num_attention_heads=14, num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),
    "q7": dict(model_type="qwen2", hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
               num_attention_heads=28, num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False),
    "l1": dict(model_type="llama", hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
               num_attention_heads=32, num_key_value_heads=4, vocab_size=32000, tie_word_embeddings=False),
    "l7": dict(model_type="llama", hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
               num_attention_heads=32, num_key_value_heads=32, vocab_size=32000, tie_word_embeddings=False),
    "l13": dict(model_type="llama", hidden_size=5120, intermediate_size=13824, num_hidden_layers=40,
                num_attention_heads=40, num_key_value_heads=40, vocab_size=32000, tie_word_embeddings=False),
    # held out (issue 23's lesson for the estimator): architectures and sizes no constant was fitted on, measured
    # once and reported before anything is changed (BENCHMARKS.md, "The estimator on architectures it has not seen")
    "l8": dict(model_type="llama", hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
               num_attention_heads=32, num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=False,
               rope_theta=500000.0),
    "q3_8": dict(model_type="qwen3", hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                 num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                 tie_word_embeddings=False),
    "q3_17": dict(model_type="qwen3", hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                  num_attention_heads=16, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                  tie_word_embeddings=True),
    "g2": dict(model_type="gemma2", hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
               num_attention_heads=8, num_key_value_heads=4, head_dim=256, vocab_size=256000,
               tie_word_embeddings=True),
    "p3": dict(model_type="phi3", hidden_size=3072, intermediate_size=8192, num_hidden_layers=32,
               num_attention_heads=32, num_key_value_heads=32, vocab_size=32064, tie_word_embeddings=False),
    # small models (`--grid small`): the embedded tiny recipe's model (loratui/trainer/tiny.py, its 707-token BPE),
    # a llama-shaped ~32M, SmolLM-135M and SmolLM-360M (public configs); with q05 (Qwen2.5-0.5B) at small batches
    "tiny": dict(model_type="qwen2", hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                 num_attention_heads=4, num_key_value_heads=2, vocab_size=707, tie_word_embeddings=True),
    "l30m": dict(model_type="llama", hidden_size=384, intermediate_size=1024, num_hidden_layers=4,
                 num_attention_heads=6, num_key_value_heads=6, vocab_size=32000, tie_word_embeddings=False),
    "s135": dict(model_type="llama", hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                 num_attention_heads=9, num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=True),
    "s360": dict(model_type="llama", hidden_size=960, intermediate_size=2560, num_hidden_layers=32,
                 num_attention_heads=15, num_key_value_heads=5, vocab_size=49152, tie_word_embeddings=True),
}
BUILD_S = {"tiny": 8, "l30m": 8, "s135": 9, "s360": 10, "q05": 12, "l1": 14, "q7": 35, "l7": 35, "l13": 50, "l8": 40, "q3_8": 42, "q3_17": 14, "g2": 16, "p3": 24}
BILLIONS = {"tiny": 0.004, "l30m": 0.032, "s135": 0.135, "s360": 0.362, "q05": 0.5, "l1": 1.1, "q7": 7.6, "l7": 6.7, "l13": 13, "l8": 8.0, "q3_8": 8.2, "q3_17": 1.7, "g2": 2.6,
            "p3": 3.8}
PHI3 = ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]
"""Phi-3's fused projections: the same seven weights under four names."""

SEVEN = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def cfg(model: str, quant: str, batch: int, seq: int, gc: bool, optim: str, attn: str = "sdpa",
        r: int = 64, targets: list[str] | None = None, dropout: float = 0.05) -> dict:
    """One grid row; quant is 'bf16', 'nf4', 'nf4dq' (nf4 with double quant) or 'fp32' (float32 weights, no bf16
    autocast: the tiny recipe's way)."""
    row = dict(model=model, quant=quant, batch=batch, seq=seq, gc=gc, optim=optim, attn=attn, r=r,
               targets=targets or SEVEN)
    if dropout != 0.05:  # the calibration rows were all measured at 0.05 and carry no key for it
        row["dropout"] = dropout
    return row


GRID = [
    cfg("q05", "bf16", 4, 1024, False, "adamw_torch_fused"),
    cfg("q05", "nf4dq", 2, 4096, False, "paged_adamw_8bit"),
    cfg("q05", "bf16", 8, 2048, True, "adamw_torch"),
    cfg("q05", "nf4", 8, 512, True, "adamw_8bit", r=16),
    cfg("l1", "bf16", 4, 2048, False, "adamw_8bit"),
    cfg("l1", "nf4dq", 8, 4096, True, "paged_adamw_32bit"),
    cfg("q7", "nf4dq", 4, 2048, True, "paged_adamw_8bit"),
    cfg("q7", "nf4dq", 1, 4096, False, "adamw_torch_fused"),
    cfg("q7", "bf16", 2, 2048, False, "adamw_torch_fused"),
    cfg("q7", "bf16", 8, 1024, True, "paged_adamw_8bit"),
    cfg("q7", "nf4", 4, 512, False, "adamw_torch", attn="eager"),
    cfg("l13", "nf4dq", 4, 2048, True, "paged_adamw_8bit"),
    cfg("l13", "bf16", 2, 2048, False, "adamw_torch_fused"),
    cfg("l13", "nf4dq", 1, 4096, False, "paged_adamw_8bit"),
    cfg("l7", "nf4dq", 4, 2048, True, "paged_adamw_8bit"),
    cfg("l7", "bf16", 1, 4096, False, "adamw_torch_fused"),
    cfg("l7", "nf4", 8, 1024, False, "adamw_8bit"),
]
HOLDOUT = [
    cfg("l8", "nf4dq", 4, 2048, True, "paged_adamw_8bit"),
    cfg("l8", "bf16", 2, 1024, False, "adamw_torch_fused"),
    cfg("q3_8", "nf4dq", 4, 2048, True, "paged_adamw_8bit"),
    cfg("q3_17", "bf16", 8, 1024, True, "adamw_torch"),
    cfg("g2", "nf4", 4, 1024, True, "adamw_8bit", attn="eager"),
    cfg("p3", "nf4dq", 4, 2048, True, "paged_adamw_8bit", targets=PHI3),
]
"""Configs of the held-out architectures (`--grid holdout`)."""

SMALL = [
    cfg("tiny", "fp32", 8, 64, False, "adamw_torch", r=16, dropout=0.0),  # recipes/tiny.toml as it runs on a GPU
    cfg("tiny", "bf16", 16, 512, True, "adamw_torch_fused", r=16),
    cfg("tiny", "nf4", 8, 256, False, "paged_adamw_8bit", r=16),
    cfg("l30m", "bf16", 8, 512, False, "adamw_torch_fused", r=16),
    cfg("l30m", "nf4dq", 16, 1024, True, "paged_adamw_8bit"),
    cfg("s135", "bf16", 4, 1024, True, "adamw_torch"),
    cfg("s135", "nf4", 8, 512, False, "adamw_8bit", r=16),
    cfg("s135", "nf4dq", 1, 256, True, "adamw_torch_fused", r=16),
    cfg("s360", "nf4dq", 2, 2048, True, "paged_adamw_8bit"),
    cfg("s360", "bf16", 8, 512, False, "adamw_torch_fused", r=16),
    cfg("q05", "nf4dq", 1, 512, True, "paged_adamw_8bit", r=16),
    cfg("q05", "bf16", 2, 256, False, "adamw_torch_fused"),
]
"""Small models (`--grid small`), for the estimate's allocator slack and context below ~0.5B parameters."""


def config_name(c: dict) -> str:
    """A short readable id of a grid row."""
    gc = "gc" if c["gc"] else "nogc"
    name = f"{c['model']}-{c['quant']}-b{c['batch']}-s{c['seq']}-{gc}-{c['optim']}-{c['attn']}-r{c['r']}"
    return name + (f"-d{c['dropout']:g}" if "dropout" in c else "")


def small_half(c: dict) -> str:
    """'fit' or 'holdout', fixed before anything was measured: SMALL sorted by model (in MODELS' order), then by the
    sha256 of the config name, and alternate rows from 'fit' on, so each model has rows in both halves."""
    import hashlib

    order = sorted(SMALL, key=lambda row: (list(MODELS).index(row["model"]),
                                           hashlib.sha256(config_name(row).encode()).hexdigest()))
    return "fit" if order.index(c) % 2 == 0 else "holdout"


def estimated_seconds(c: dict) -> float:
    """A rough duration of one measurement (load + 4 steps), to skip what cannot finish in time."""
    billions = BILLIONS[c["model"]]
    load = 6 + billions * (0.8 if c["quant"] == "bf16" else 1.6)
    tokens = c["batch"] * c["seq"]
    step = 6 * billions * 1e9 * tokens * (1.33 if c["gc"] else 1.0) / 250e12  # ~250 TFLOP/s achieved
    return 8 + load + 5 * step


# --------------------------------------------------------------------------- children


class NvmlPeak(threading.Thread):
    """Samples device memory used at 100 Hz and keeps the maximum since the last reset."""

    def __init__(self, index: int = 0) -> None:
        super().__init__(daemon=True)
        import pynvml

        pynvml.nvmlInit()
        self._nvml = pynvml
        self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        self.peak = self.read()
        self.running = True

    def read(self) -> int:
        return int(self._nvml.nvmlDeviceGetMemoryInfo(self._handle).used)

    def reset(self) -> int:
        self.peak = self.read()
        return self.peak

    def run(self) -> None:
        while self.running:
            self.peak = max(self.peak, self.read())
            time.sleep(0.01)


def build_checkpoint(name: str, path: Path) -> None:
    """A random-init bf16 checkpoint of MODELS[name], built on the GPU and saved as safetensors."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    spec = dict(MODELS[name])
    kind = spec.pop("model_type")
    config = AutoConfig.for_model(kind, max_position_embeddings=32768, **spec)
    config.use_cache = False
    torch.manual_seed(0)
    with torch.device("cuda" if DEVICE != "cpu" else "cpu"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa")
    model.save_pretrained(path, max_shard_size="5GB")
    (path / "COMPLETE").write_text("ok")


def load_like_loratui(c: dict, path: Path):
    """The model exactly as loratui/trainer/build.py::load_model makes it."""
    import torch
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    kwargs = dict(dtype=torch.float32 if c["quant"] == "fp32" else torch.bfloat16, attn_implementation=c["attn"],
                  device_map={"": DEVICE})
    quantised = c["quant"] not in ("bf16", "fp32")
    if quantised:
        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=c["quant"] == "nf4dq",
            bnb_4bit_compute_dtype=torch.bfloat16)
    model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    model.config.use_cache = False
    if quantised:
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=c["gc"],
                                                gradient_checkpointing_kwargs={"use_reentrant": False})
    elif c["gc"]:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    lora = LoraConfig(r=c["r"], lora_alpha=2 * c["r"], lora_dropout=c.get("dropout", 0.05), target_modules=c["targets"],
                      bias="none", task_type="CAUSAL_LM")
    return get_peft_model(model, lora)


class RandomTokens:
    """Random token ids as a map-style dataset (no tokenizer needed)."""

    def __init__(self, n: int, seq: int, vocab: int) -> None:
        import torch

        self.ids = torch.randint(0, vocab, (n, seq), generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        import torch

        ids = self.ids[i]
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}


def train_and_measure(c: dict, path: Path, steps: int, sampler: NvmlPeak) -> dict:
    """Train `steps` optimizer steps and return the per-step torch and NVML peaks."""
    import torch
    from transformers import Trainer, TrainerCallback, TrainingArguments, default_data_collator

    per_step: list[dict] = []

    class Peaks(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            sampler.reset()
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            torch.cuda.synchronize()
            time.sleep(0.03)  # let the sampler see the tail of the step
            per_step.append(dict(alloc=torch.cuda.max_memory_allocated() / GIB,
                                 reserved=torch.cuda.max_memory_reserved() / GIB,
                                 nvml=sampler.peak / GIB, seconds=time.perf_counter() - self.t0))

    model = load_like_loratui(c, path)
    after_load = dict(alloc=torch.cuda.memory_allocated() / GIB, nvml=sampler.read() / GIB)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    data = RandomTokens(c["batch"] * steps, c["seq"], MODELS[c["model"]]["vocab_size"])
    args = TrainingArguments(
        output_dir=f"/tmp/egrid-out-{os.getpid()}", per_device_train_batch_size=c["batch"],
        gradient_accumulation_steps=1, max_steps=steps, learning_rate=2e-4, lr_scheduler_type="constant",
        bf16=c["quant"] != "fp32", optim=c["optim"], max_grad_norm=0.3, logging_steps=1, save_strategy="no",
        report_to="none", disable_tqdm=True, remove_unused_columns=False, dataloader_num_workers=0,
        use_cpu=DEVICE == "cpu")
    Trainer(model=model, args=args, train_dataset=data, data_collator=default_data_collator,
            callbacks=[Peaks()]).train()
    return dict(after_load=after_load, trainable_params=trainable, per_step=per_step)


def measure(c: dict, path: Path, steps: int) -> dict:
    """One config in this (fresh) process: the result row, or the error that stopped it."""
    sampler = NvmlPeak()
    idle = sampler.read() / GIB
    sampler.start()
    row = dict(name=config_name(c), **c, model_config=MODELS[c["model"]], steps=steps, nvml_idle_gib=idle)
    t0 = time.perf_counter()
    try:
        row.update(train_and_measure(c, path, steps, sampler))
        later = row["per_step"][1:] or row["per_step"]  # step 1 lacks the optimizer state
        row.update(status="ok", nvml_peak_gib=max(s["nvml"] for s in later),
                   torch_peak_reserved_gib=max(s["reserved"] for s in later),
                   torch_peak_alloc_gib=max(s["alloc"] for s in later),
                   step_s=sorted(s["seconds"] for s in later)[len(later) // 2])
    except Exception as exc:  # an OOM is a result too
        row.update(status="oom" if "out of memory" in str(exc).lower() else "error",
                   error=f"{type(exc).__name__}: {str(exc)[:300]}", trace=traceback.format_exc()[-1500:])
    sampler.running = False
    row.update(wall_s=round(time.perf_counter() - t0, 1), versions=_versions())
    return row


def _versions() -> dict:
    import bitsandbytes
    import peft
    import torch
    import transformers

    return dict(torch=torch.__version__, transformers=transformers.__version__, peft=peft.__version__,
                bitsandbytes=bitsandbytes.__version__, gpu=torch.cuda.get_device_name(0))


def child_main(task: dict) -> None:
    """Entry of a child: build a checkpoint or measure one config, writing JSON to task['result']."""
    if task["kind"] == "build":
        build_checkpoint(task["model"], Path(task["path"]))
        result = {"built": task["model"]}
    else:
        result = measure(task["config"], Path(task["path"]), task["steps"])
    Path(task["result"]).write_text(json.dumps(result))


# --------------------------------------------------------------------------- parent


def run_child(task: dict, timeout: float, fork: bool) -> dict | None:
    """Run one child task (forked or spawned) and return its JSON result, None if it died."""
    result = Path(task["result"])
    result.unlink(missing_ok=True)
    if fork:
        import multiprocessing

        proc = multiprocessing.get_context("fork").Process(target=child_main, args=(task,))
        proc.start()
        proc.join(timeout)
        if proc.is_alive():
            proc.kill()
            proc.join()
    else:
        try:
            subprocess.run([sys.executable, __file__, "--child", json.dumps(task)], timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
    return json.loads(result.read_text()) if result.exists() else None


def ensure_checkpoint(name: str, work: Path, deadline: float, fork: bool, log) -> Path | None:
    """The model's checkpoint dir, built unless a marker says it is complete; None when out of time."""
    path = work / name
    if (path / "COMPLETE").exists():
        return path
    if time.monotonic() + BUILD_S[name] > deadline:
        return None
    for other in work.iterdir():  # the disk holds about two 7-13B bf16 checkpoints, not three
        if other.is_dir() and other.name != name and other.name in MODELS:
            shutil.rmtree(other, ignore_errors=True)
    shutil.rmtree(path, ignore_errors=True)
    t0 = time.monotonic()
    run_child(dict(kind="build", model=name, path=str(path), result=str(work / "result.json")),
              deadline - time.monotonic(), fork)
    log(f"# built {name} in {time.monotonic() - t0:.0f} s")
    return path if (path / "COMPLETE").exists() else None


def summary_line(row: dict) -> str:
    """One compact line per finished config."""
    if row.get("status") != "ok":
        return f"{row['name']:60s} {row.get('status')}: {row.get('error', '')[:120]}"
    return (f"{row['name']:60s} nvml {row['nvml_peak_gib']:6.2f}  reserved {row['torch_peak_reserved_gib']:6.2f}"
            f"  alloc {row['torch_peak_alloc_gib']:6.2f} GiB  step {row['step_s']:.2f} s  wall {row['wall_s']} s")


def main() -> int:
    """Parse arguments and measure the selected part of the grid inside the time budget."""
    # set here, not at import: bench/estimate_holdout.py (and through it the tests) imports this module's configs
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")  # is_available() must not cuInit before fork
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=False)
    parser.add_argument("--budget", type=float, default=500, help="seconds for the whole run")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated model keys, in order")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--work", type=Path, default=Path("/tmp/egrid"))
    parser.add_argument("--spawn", action="store_true", help="spawn children instead of forking")
    parser.add_argument("--grid", choices=("calibration", "holdout", "small"), default="calibration",
                        help="the configs the constants were fitted on, the held-out architectures, or small models")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(json.loads(args.child))
        return 0
    deadline = time.monotonic() + args.budget
    fork = not args.spawn and _preload()
    args.work.mkdir(parents=True, exist_ok=True)
    log = _logger(args.out)
    log(f"# mode {'fork' if fork else 'spawn'}; budget {args.budget:.0f} s")
    for name in args.models.split(","):
        _measure_model(name, args, deadline, fork, log)
    return 0


def _measure_model(name: str, args, deadline: float, fork: bool, log) -> None:
    """Every grid row of one model, skipping rows that would not finish before the deadline."""
    grid = {"holdout": HOLDOUT, "small": SMALL}.get(args.grid, GRID)
    rows = [c for c in grid if c["model"] == name]
    if not rows or time.monotonic() + estimated_seconds(rows[0]) + BUILD_S[name] > deadline:
        log(f"# skip {name}: not enough time left")
        return
    path = ensure_checkpoint(name, args.work, deadline, fork, log)
    if path is None:
        log(f"# skip {name}: checkpoint not built")
        return
    for c in rows:
        left = deadline - time.monotonic()
        if estimated_seconds(c) > left:
            log(f"# skip {config_name(c)}: needs ~{estimated_seconds(c):.0f} s, {left:.0f} s left")
            continue
        task = dict(kind="measure", config=c, path=str(path), steps=args.steps,
                    result=str(args.work / "result.json"))
        row = run_child(task, left, fork) or dict(name=config_name(c), **c, status="died")
        log(summary_line(row), row)


def _preload() -> bool:
    """Import the heavy libraries once in the parent; True when forking children is still safe."""
    import torch
    import transformers  # noqa: F401
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments  # noqa: F401

    return not torch.cuda.is_initialized()


def _logger(out: Path | None):
    """A function printing a line (and appending a JSON row to `out`), flushed at once."""
    def log(line: str, row: dict | None = None) -> None:
        print(line, flush=True)
        if out is not None and row is not None:
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")
    return log


if __name__ == "__main__":
    sys.exit(main())
