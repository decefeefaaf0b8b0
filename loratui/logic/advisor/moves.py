"""The moves advice proposes, computed from the recipe alone (a memory saving that fits it, a lower learning rate),
and the advice for VRAM, a memory leak, ranks out of step, a starved loader and a setup error; the OOM's advice is in
oom_advice.py, the loss's in loss_advice.py, and build.py picks the builder of each finding."""

from __future__ import annotations

import re
from typing import Any

from loratui.logic import oom
from loratui.logic.advisor.advice import ERROR, INFO, MIB, WARNING, Advice, Finding, more_workers
from loratui.logic.advisor import cuda
from loratui.logic.advisor.watches import TRITON_DOT
from loratui.recipe import Recipe

# -- turning findings into advice: moves computed from the recipe ------------------------------------

Move = tuple[str, dict[str, Any]]
"""What to say and the change that does it."""
gib = oom.gib


NO_RECIPE_MOVE = ("lower the batch size (per_device_train_batch_size), then the sequence length (max_length), or "
                  "enable gradient checkpointing")
"""A training OOM's move with no recipe: said in any loop's words, the Trainer's names in brackets (a Keras or plain
PyTorch script has no per_device_train_batch_size)."""


def memory_move(r: Recipe | None, phase: str = "", logits_gib: float = 0.0, priced: Any = None,
                lengths: dict[str, int] | None = None) -> Move:
    """The first memory saving that fits the recipe: liger where the logits are large (it costs no
    speed), then batch, checkpointing, length, and 4-bit. `logits_gib`: the estimate's logits term.
    `priced`: the estimator's top proposal (logic/priced_moves.py), which wins when there is one.
    `lengths`: a watched config's own length fields where it has no max_length (GRPOConfig's
    max_completion_length): the length move lowers those, never a max_length the trainer does not read."""
    if priced is not None and phase != "load":
        return priced.describe(), dict(priced.change)
    if r is None:
        return NO_RECIPE_MOVE, {}
    t, q, d = r.training, r.quantization, r.data
    quantized = q.load_in_4bit or q.load_in_8bit
    if phase == "load":  # the weights alone did not fit: only quantization or a smaller model helps
        return _four_bit(r) if not quantized else ("the weights alone do not fit: use a smaller model", {})
    if logits_gib >= LIGER_WORTH_GIB and not t.use_liger_kernel:
        return (f"use_liger_kernel = true: the loss's logits take {logits_gib:.1f} GiB of the estimate, and "
                "liger's fused cross-entropy never builds them (Qwen2.5-7B on an H200: 21.3 -> 15.2 GiB at "
                "the same speed; needs `pip install liger-kernel` where it trains)",
                {"training.use_liger_kernel": True})
    if t.per_device_train_batch_size > 1:
        return _halve_batch(t.per_device_train_batch_size, t.gradient_accumulation_steps)
    if not t.gradient_checkpointing:
        return ("enable gradient_checkpointing (less activation memory, ~20-30% slower steps)",
                {"training.gradient_checkpointing": True})
    if lengths is not None:
        own = _own_length(lengths)
        if own is not None:
            return own
    elif d.max_length > 512:
        return (f"lower max_length from {d.max_length} to {d.max_length // 2} (long samples get truncated)",
                {"data.max_length": d.max_length // 2})
    if not quantized:
        return _four_bit(r)
    return "batch 1, checkpointing and 4-bit are all in use: use a smaller model or a larger card", {}


def _own_length(lengths: dict[str, int]) -> Move | None:
    """Halve the first of the config's own length caps (TRL's order: completions, then prompts) still above 128
    tokens, named as the config names it; None when none is."""
    name, value = next(((n, v) for n, v in lengths.items() if v > 128), ("", 0))
    if not name:
        return None
    what = "completions" if "completion" in name else "prompts"
    return (f"lower {name} from {value} to {value // 2} (longer {what} are cut)", {name: value // 2})


LIGER_WORTH_GIB = 3.0
"""Logits this large are worth the liger kernels (they leave ~1-2 GiB of the lm_head's size behind)."""


def _halve_batch(batch: int, accum: int) -> Move:
    """Halve the micro-batch and raise accumulation so the effective batch stays the same."""
    new_batch = batch // 2
    new_accum = -(-batch * accum // new_batch)
    return (f"per_device_train_batch_size {batch} -> {new_batch}, gradient_accumulation_steps {accum} -> "
            f"{new_accum} (effective batch {batch * accum} -> {new_batch * new_accum})",
            {"training.per_device_train_batch_size": new_batch, "training.gradient_accumulation_steps": new_accum})


def _four_bit(r: Recipe) -> Move:
    """Load the base model in 4-bit NF4 (QLoRA), with a compute dtype that fits the precision setting."""
    compute = "float16" if r.training.fp16 else "bfloat16"
    return ("load the model in 4-bit (QLoRA: NF4 + double quantization, weights ~1/4 the size)",
            {"quantization.load_in_4bit": True, "quantization.bnb_4bit_quant_type": "nf4",
             "quantization.bnb_4bit_use_double_quant": True, "quantization.bnb_4bit_compute_dtype": compute})


def lr_move(r: Recipe | None, lr_now: float | None, divisor: int = 3, share: str = "a third",
             said_by: str = "its last log") -> Move:
    """The configured learning rate over `divisor` (`share` says it in words), naming the current one. Without a
    recipe (a plain watched script, a pasted log) the rate is the script's own: loratui knows no value or key for
    it, only what `said_by` said (a log, or the person's text)."""
    if r is None:
        known = f"{said_by} said {lr_text(lr_now)}" if lr_now else "loratui does not know its value"
        return f"lower the learning rate your script sets, e.g. to {share} of it ({known})", {}
    lr = r.training.learning_rate
    new = float(f"{lr / divisor:.2g}")
    return f"lower learning_rate from {lr_text(lr)} to {lr_text(new)}", {"training.learning_rate": new}


COLLAPSE_LR_DIVISOR = 100
"""A collapse's learning rate over this: measured on real 40-step tiny CPU runs from 0.9, where a third (0.3), a
tenth (0.09), a thirtieth (0.03) and a fiftieth (0.018) still collapsed (loss ~5.45, grad_norm 0.003-0.05) and a
hundredth (0.009) trained (loss 6.57 -> 4.7, grad_norm 0.3-1; a two-hundredth, 0.0045: 3.6, near the recipe's own
3e-3 at 3.4): one apply must leave the collapse (tests/test_collapse.py)."""


def lr_text(value: float | None) -> str:
    """A learning rate to three significant figures, "?" when unknown."""
    return "?" if value is None else f"{value:.3g}"


# -- VRAM, loss, memory, data -------------------------------------------------------------------------


def _vram_advice(f: Finding, r: Recipe | None, logits_gib: float = 0.0, priced: Any = None,
                 lengths: dict[str, int] | None = None) -> Advice:
    """Over the warning line: the first memory saving that fits the recipe (`lengths`: as memory_move's)."""
    facts = f.facts
    text, change = memory_move(r, logits_gib=logits_gib, priced=priced, lengths=lengths)
    peak, line = facts["peak"], facts["line"]
    if facts.get("projected"):
        return Advice("vram_near_limit", WARNING, f"Projected peak {gib(peak)} is over the {gib(line)} "
                      f"warning line: {text}", [f"pre-flight estimate {gib(peak)}",
                                               f"warning line {gib(line)} (warn_gb, GiB)"], change, f.step)
    total = facts["total"]
    severity = ERROR if total and peak >= 0.97 * total else WARNING
    name = f" ({facts['name']})" if facts.get("name") else ""
    evidence = [f"GPU {facts['gpu']}{name}: peak {gib(peak)} of {gib(total)}",
                f"{facts['windows']} sampling windows over the line within 10 s",
                f"warning line {gib(line)}" + (" (95% of the card)" if line < facts["warn"] else " (warn_gb, GiB)")]
    return Advice("vram_near_limit", severity, f"VRAM peak {gib(peak)} is over the {gib(line)} line: {text}",
                  evidence, change, f.step)


def _leak_advice(f: Finding, r: Recipe | None) -> Advice:
    facts = f.facts
    growth = facts["last"] - facts["first"]
    evidence = [f"torch allocated at step end: {gib(facts['first'])} at step {facts['from_step']} -> "
                f"{gib(facts['last'])} at step {facts['to_step']}",
                f"rose in {facts['rising']} of {facts['n']} steps, {facts['per_step'] / MIB:.1f} MiB a step",
                "check for tensors kept across steps: a collate function or callback appending to a list, "
                "a loss kept without .item()"]
    if facts.get("full_at") is not None:
        evidence.insert(2, f"at this rate the card is full around step {facts['full_at']}")
    return Advice("memory_leak", WARNING, f"Memory creeps up {gib(growth)} over steps {facts['from_step']}-"
                  f"{facts['to_step']}: something keeps tensors", evidence, {}, f.step)


def _rank_advice(f: Finding, r: Recipe | None) -> Advice:
    """One rank holds far more than another: longer batches there (fixed by packing), or work done on
    one rank only."""
    peaks, lens = f.facts["peaks"], f.facts["lens"]
    high, low = max(peaks, key=peaks.__getitem__), min(peaks, key=peaks.__getitem__)
    title = f"Rank {high} peaks at {gib(peaks[high])}, rank {low} at {gib(peaks[low])}"
    evidence = ["torch peak reserved per rank: " + ", ".join(f"rank {k} {gib(v)}" for k, v in sorted(peaks.items()))]
    if lens.get(high) and lens.get(low):
        evidence.append("longest sequence per rank: " + ", ".join(f"rank {k} {v}" for k, v in sorted(lens.items())))
        if lens[high] >= 1.3 * lens[low] and r is not None and not r.data.packing:
            return Advice("rank_imbalance", WARNING, f"{title}: its batches run longer ({lens[high]} vs "
                          f"{lens[low]} tokens); packing gives every rank full blocks of max_length tokens",
                          evidence + ["every rank must fit the longest batch: the card's size is set by the worst"],
                          {"data.packing": True}, f.step)
    evidence.append("the batches are alike, so the extra is work done on one rank only: evaluation or logging "
                    "on rank 0, a full state-dict gather at save, or a model loaded with device_map='auto'")
    return Advice("rank_imbalance", WARNING, f"{title}: one rank does extra work", evidence, {}, f.step)


def _starve_advice(f: Finding, r: Recipe | None) -> Advice:
    facts = f.facts
    text, change = "pre-tokenise the data and keep __getitem__ cheap", {}
    if r is not None:
        t = r.training
        new = more_workers(t.dataloader_num_workers)
        if new is not None:
            text = f"dataloader_num_workers {t.dataloader_num_workers} -> {new}"
            change = {"training.dataloader_num_workers": new}
        elif not t.dataloader_pin_memory:
            text, change = "set dataloader_pin_memory = true", {"training.dataloader_pin_memory": True}
    evidence = [f"GPU utilisation {facts['util']:.0f}% on average over {facts['span']:.0f} s of training",
                f"{facts['gap']:.0%} of the time between step ends is spent outside the step (loading data)",
                f"{facts['steps']} steps, {facts['per_step']:.2f} s apart"]
    return Advice("data_starved", INFO, f"The GPU waits for data ({facts['util']:.0f}% busy): {text}",
                  evidence, change, f.step)


def _setup_advice(f: Finding, r: Recipe | None) -> Advice:
    line = f.facts["line"]
    if f.id == "bnb_setup":
        return _bnb_advice(f, line)
    if f.id == "flash_attn_unavailable" and _XFORMERS.search(line):
        return Advice(f.id, ERROR, "xFormers' attention kernels cannot be used here: install the xformers build made "
                      "for this torch and CUDA, or run without xformers (PyTorch's sdpa)",
                      [line, "`python -m xformers.info` lists which of its operators this build has; a wheel built "
                       "without CUDA (or for another torch) has none on the GPU"], {}, f.step)
    if f.id == "flash_attn_unavailable" and _TRITON_API.search(line):
        return Advice(f.id, ERROR, "flash-attention's Triton kernel here was written for the Triton before 2.0 (whose "
                      "tl.dot took trans_b): use the model's own attention instead (MPT: attn_config['attn_impl'] = "
                      "'torch'; remote code that falls back without it: pip uninstall triton), or install the Triton "
                      "its code pins",
                      [line, "Triton 2.0 (its MLIR rewrite) dropped tl.dot's trans_a/trans_b arguments "
                       "(triton-lang/triton#1098); flash_attn_triton.py and its copies in MPT's and DNABERT-2's "
                       "remote code still pass them"], {}, f.step)
    if f.id == "flash_attn_unavailable":
        change = {"model.attn_implementation": "sdpa"}
        if r is not None and r.model.attn_implementation != "flash_attention_2":
            change = {}
        title, evidence = "flash-attention cannot be used here: use attn_implementation = \"sdpa\"", [line]
        if f.facts.get("build"):  # its setup.py failed as pip built it: the package never installed
            title = "flash-attn did not install: its setup.py failed; fix what its error names, or use " \
                "attn_implementation = \"sdpa\""
            evidence.append("pip builds flash-attn from source when no wheel matches this torch, CUDA and Python: the "
                            "build needs torch, packaging, ninja and wheel installed first (pip install "
                            "--no-build-isolation) and the CUDA toolkit (nvcc)")
        return Advice(f.id, ERROR, title, evidence + ["sdpa needs no extra package and is close in speed"], change,
                      f.step)
    return _cuda_error_advice(f, line)


_TRITON_API = re.compile(TRITON_DOT)
_XFORMERS = re.compile(r"xformers|memory_efficient_attention", re.I)
"""The attention kernels that could not be used are xFormers' (not the flash_attn package's)."""
_BNB_MISSING = re.compile(r"No module named '?bitsandbytes'?(?:\s|$)|bitsandbytes is not installed", re.I)
_BNB_NO_BUILD = re.compile(r"is not a supported wheel|satisfies the requirement bitsandbytes|"
                           r"No matching distribution found for bitsandbytes|Error building extension '?bitsandbytes|"
                           r"(?:Failed building wheel|Could not build wheels) for bitsandbytes|compiling \S*bitsandbytes",
                           re.I)
_BNB_OLD = re.compile(r"(?:requires|and) the latest version of bitsandbytes|bitsandbytes\s*>=\s*\d|version of `?bitsandbytes`? "
                      r"that is not compatible|bitsandbytes.{0,40}(?:too old|upgrade)|"
                      r"module '?bitsandbytes[\w.]*'? has no attribute", re.I)
_BNB_MIN = re.compile(r"bitsandbytes\s*>=\s*([\d.]*\d)", re.I)
_BNB_VAGUE = re.compile(r"requires .{0,40}bitsandbytes.{0,40}(?:pip install|not installed|not found)", re.I)
_BNB_BROKEN = re.compile(r"No module named '?bitsandbytes\.", re.I)


def _bnb_advice(f: Finding, line: str) -> Advice:
    """Missing -> the install command; broken -> a forced reinstall; no GPU support -> a CUDA build."""
    if _BNB_BROKEN.search(line):
        return Advice("bnb_setup", ERROR, "bitsandbytes is installed but broken (a file is missing): "
                      "pip install --force-reinstall -U bitsandbytes", [line], {}, f.step)
    if f.facts.get("mac"):  # a CUDA build of bitsandbytes cannot apply on a Mac's GPU
        return Advice("bnb_setup", ERROR, "bitsandbytes' 4-bit/8-bit kernels need a CUDA GPU (or ROCm, Intel XPU), and "
                      "this is a Mac: load the model in 16-bit on MPS without quantization_config, or use MLX "
                      "(mlx_lm, its 4-bit models) to train there",
                      [line, "the text puts it on a Mac: " + f.facts["mac"]] if f.facts["mac"] != line else [line],
                      {}, f.step)
    if _BNB_NO_BUILD.search(line):
        return Advice("bnb_setup", ERROR, "pip has no bitsandbytes build for this platform or Python (or building "
                      "it failed): check the Python version and OS (python -VV) against the wheels on PyPI, install "
                      "a prebuilt wheel (pip install -U bitsandbytes), or build it with a CUDA toolkit that matches torch",
                      [line], {}, f.step)
    if _BNB_MISSING.search(line):
        return Advice("bnb_setup", ERROR, "bitsandbytes is not installed (4-bit/8-bit loading and 8-bit optimizers "
                      "need it): pip install -U bitsandbytes", [line], {}, f.step)
    if _BNB_OLD.search(line) or _BNB_VAGUE.search(line):
        # transformers says the same words for a missing and an outdated install: name both, and the version
        least = _BNB_MIN.search(line)
        need = f"bitsandbytes>={least.group(1)}" if least else "bitsandbytes"
        return Advice("bnb_setup", ERROR, f"bitsandbytes is missing or older than this transformers needs"
                      f"{f' ({least.group(1)})' if least else ''}: pip install -U '{need}'",
                      [line, "python -m pip show bitsandbytes says which version is installed"], {}, f.step)
    return Advice("bnb_setup", ERROR, "bitsandbytes cannot use the GPU: pip install -U bitsandbytes (a build for "
                  "torch's CUDA)", [line, "python -m bitsandbytes prints why it cannot find CUDA"], {}, f.step)


_CUDA_HINTS = (
    ("srcIndex < srcSelectDimSize", "a token id is outside the embedding table: resize the embeddings after "
     "adding tokens, or use the model's own tokenizer"),
    ("t < n_classes", "a label id is out of range: labels must be token ids or -100"),
    ("no kernel image", "this torch build has no kernels for this GPU: install a torch built for its CUDA "
     "capability"),
    ("unable to find an engine", "cuDNN found no kernel for this computation: check that torch loads the cuDNN it "
     "ships with (a system libcudnn earlier on LD_LIBRARY_PATH is the usual cause), then try a smaller batch or "
     "torch.backends.cudnn.enabled = False to confirm"),
)


_NCCL = re.compile(r"NCCL error|NCCL communicator", re.I)


def _nccl_advice(f: Finding, line: str) -> Advice:
    """A collective timed out or NCCL failed: one rank stalled, died or went its own way."""
    evidence = [line, "one rank stopped joining collectives: find the first error in the other ranks' output",
                "work done by one rank alone (uneven data, eval or save on rank 0 only) trips the same timeout"]
    return Advice("nccl_error", ERROR, "NCCL failed: rerun with NCCL_DEBUG=INFO",
                  evidence, {"env.NCCL_DEBUG": "INFO"}, f.step)


def _cuda_error_advice(f: Finding, line: str) -> Advice:
    setup = cuda.setup_advice(f, line)  # CUDA that cannot start: the driver, the build, the GPU
    if setup is not None:
        return setup
    if _NCCL.search(line):
        return _nccl_advice(f, line)
    hint = next((text for key, text in _CUDA_HINTS if key in line), "") or cuda.fault_hint(line)
    rocm = cuda.ROCM_FAULT.search(line) is not None
    switch, kind = ("AMD_SERIALIZE_KERNEL=3", "GPU error (ROCm)") if rocm else ("CUDA_LAUNCH_BLOCKING=1", "CUDA error")
    name, value = switch.split("=")
    change: dict[str, Any] = {} if "no kernel image" in line else {f"env.{name}": value}
    evidence = [line] + ([hint] if ":" in hint else [])  # a hint with no fix after its colon is all in the title
    if change:
        evidence.append(f"the op named in an asynchronous GPU error is often the wrong one; {switch} makes the "
                        "traceback point at the failing op")
    title = f"{kind}: {hint.split(':')[0]}" if hint else f"{kind}: rerun with {switch}"
    return Advice("cuda_error", ERROR, title, evidence, change, f.step)


