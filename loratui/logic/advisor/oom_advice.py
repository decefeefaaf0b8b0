"""The advice for an out-of-memory error: its kind's move (a memory saving, the allocator's setting, the card's other
holders), the phase it struck in (evaluation, a save or merge, the host's RAM), and the evidence its numbers give."""

from __future__ import annotations

import re
from typing import Any

from loratui.logic import oom
from loratui.logic.advisor.advice import ERROR, GIB, WARNING, Advice, Finding
from loratui.logic.advisor.moves import Move, gib, memory_move
from loratui.logic.fmt import clip
from loratui.recipe import Recipe


UNSETTLED = ("the message does not say what holds the memory", "the message gives only the size it asked for",
             "the message gives no usable numbers")
"""How an oom_full title says that nothing read settled the memory's kind (no numbers that do, no words that name
a holder): "full" is then the default, not a finding, and `doctor` lets the words' guess speak first."""


def kind_unsettled(advice: Advice) -> bool:
    """Whether `advice` is an oom_full whose kind is the default (UNSETTLED), not read from numbers or words."""
    return advice.id == "oom_full" and any(f"({where})" in advice.title for where in UNSETTLED)


def _oom_advice(f: Finding, r: Recipe | None, long_sample: tuple[int, int] | None = None,
                logits_gib: float = 0.0, priced: Any = None) -> list[Advice]:
    """The OOM as advice: where it happened (eval, save) and why (full, fragmented, a neighbour)."""
    report: oom.OomReport = f.facts["report"]
    phase, others = f.facts["phase"], f.facts["others"]
    kind, ran = report.kind, ran_out(report)
    if kind in (oom.FULL, oom.UNKNOWN) and oom.others_to_blame(report, others):
        kind = oom.OTHER_PROCESS
    merging = phase == "save" and bool(f.facts.get("merge"))
    evidence = _oom_evidence(report, "merge" if merging else phase, f.step)
    built = []
    if merging:
        built.append(Advice("oom_at_save", ERROR, f"{ran} while merging the adapter into the model: "
                            f"{MERGE_MOVE}", evidence, {}, f.step))
    elif phase in ("eval", "save"):
        built.append(_phase_advice(phase, f.step, r, evidence, ERROR, report.device, ran))
    if kind == oom.OTHER_PROCESS:
        built.append(_other_process_advice(report, others, f.step, evidence))
    elif kind == oom.FRAGMENTATION and report.device == "xpu":  # PYTORCH_CUDA_ALLOC_CONF does not reach its allocator
        built.append(Advice("oom_fragmentation", ERROR, f"XPU OOM from fragmentation: "
                            f"{gib(report.reserved_unallocated)} reserved but unallocated; {XPU_CACHE_MOVE}",
                            evidence, {}, f.step))
    elif kind == oom.FRAGMENTATION:
        spare = f"{gib(report.reserved_unallocated)} reserved but unallocated; " \
            if report.reserved_unallocated is not None else ""
        name, value = _allocator_setting(report)
        built.append(Advice("oom_fragmentation", ERROR,
                            f"CUDA OOM from fragmentation: {spare}set {name}={value}",
                            evidence, {f"env.{name}": value}, f.step))
    elif long_sample is not None and phase not in ("eval", "save", "load") and f.facts.get("lengths") is None:
        # truncation is max_length's: a config without one (GRPOConfig) gets its own length move below
        built.append(_long_sample_advice(long_sample, r, evidence, f.step, ran))
    elif phase not in ("eval", "save"):
        text, change = memory_move(r, phase, logits_gib, priced, f.facts.get("lengths"))
        if r is None and report.device == "metal":  # no Trainer: MLX's own flags (mlx_lm.lora --help)
            text = METAL_MOVE
        elif r is None and priced is None and f.facts.get("batch_one"):  # "lower the batch" to a batch of one
            text = BATCH_ONE_MOVE
            evidence = evidence + ["the batch is already 1, as the text says: " + f.facts["batch_one"]]
        # "no usable numbers" beside evidence quoting the request and the free memory read as a contradiction
        where = ("while loading the model" if phase == "load" else _full_words(report) if kind == oom.FULL
                 else UNSETTLED[0] if report.total is not None
                 else UNSETTLED[1] if report.requested is not None else UNSETTLED[2])
        built.append(Advice("oom_full", ERROR, f"{ran} ({where}): {text}", evidence, change, f.step))
    return built


BATCH_ONE_MOVE = ("with the batch already 1, enable gradient checkpointing, then lower the longest sequence "
                  "(max_length), or load the base in 4-bit; if all are in use, the model needs a larger card or "
                  "sharding across cards (DeepSpeed ZeRO-3, FSDP)")
"""A training OOM where the text says the batch is already one: the batch move cannot apply, the next ones can."""

METAL_MOVE = ("lower the batch size, then the longest sequence, or turn on gradient checkpointing (mlx_lm.lora's "
              "--batch-size, --max-seq-length, --grad-checkpoint); the GPU shares the Mac's memory with everything "
              "else running")
"""A Mac's GPU out of memory under MLX: its trainer's flags, not TrainingArguments' (no CUDA, no Trainer)."""


def _long_sample_advice(long_sample: tuple[int, int], r: Recipe | None, evidence: list[str],
                        step: int, ran: str = "CUDA out of memory") -> Advice:
    """One batch far longer than the rest died: truncate rather than shrink every batch."""
    batch_len, typical = long_sample
    # Room for the usual batches with margin, rounded to 64; always below the batch that failed.
    cap = min(batch_len - 1, max(64, -(-int(typical * 1.5) // 64) * 64))
    if r is not None:
        cap = min(cap, r.data.max_length)
    facts = [f"the failing batch had sequences of {batch_len} tokens; a typical step's longest was {typical}"]
    return Advice("oom_full", ERROR,
                  f"{ran} at one long sample ({batch_len} tokens vs ~{typical} usually): "
                  f"truncate with max_length = {cap}", facts + evidence, {"data.max_length": cap}, step)


def _oom_evidence(report: oom.OomReport, phase: str, step: int) -> list[str]:
    """The OOM's numbers as short lines, after where it struck (`phase`, or "merge": a save that merged an adapter)."""
    gpu = f"GPU {report.gpu}" if report.gpu is not None else "the MPS device" if report.device == "mps" else \
        "the Mac's GPU" if report.device == "metal" else "the TPU" if report.device == "tpu" else "the GPU"
    rank = f"rank {report.rank}: " if report.rank is not None else ""
    where = {"eval": "during evaluation", "save": "while saving a checkpoint", "merge": "while merging the adapter in",
             "load": "while loading", "train": "in a training step"}.get(phase, "")
    when = ", ".join(part for part in (where, f"after step {step}" if step else "") if part)
    lines = [f"{rank}{when}"] if rank or when else []
    if report.requested is not None:
        lines.append(f"tried to allocate {gib(report.requested)} on {gpu}")
    if report.total is not None:
        lines.append(f"{gib(report.free)} free of {gib(report.total)} total" if report.free is not None else
                     f"{gib(report.total)} in all")
    if report.allocated is not None:
        lines.append(f"PyTorch: {gib(report.allocated)} allocated, {gib(report.reserved_unallocated)} "
                     "reserved but unallocated")
    if report.other_used is not None and report.other_used >= GIB:
        lines.append(f"other than this process's PyTorch memory: {gib(report.other_used)} in use")
    if report.device == "mps":
        return lines + _mps_evidence(report) + [clip(report.text, 240)]
    if report.allowed is not None:
        lines.append(f"this process may use only {gib(report.allowed)} (torch.cuda.set_per_process_memory_fraction): "
                     "that cap, not the card, was reached; raise the fraction or use less")
    if report.note:
        lines.append(report.note if report.note == oom.CONTEXT_NOTE or report.held else
                     f"numbers ignored: {report.note}")
    lines.append(clip(report.text, 240))
    return lines


def _other_process_advice(report: oom.OomReport, others: list[tuple[int, int]], step: int,
                          evidence: list[str]) -> Advice:
    """Name the processes holding memory on this run's GPU."""
    pids = list(others) or list(report.other_pids)
    named = ", ".join(f"PID {pid} ({gib(used)})" for pid, used in pids[:6])
    held = gib(sum(b for _, b in pids)) if pids else gib(report.other_used)
    word, (lists, choose) = DEVICE_WORD[report.device], _HOLDERS[report.device]
    oom_word = "OOM" if ran_out(report) == UNNAMED else f"{word} OOM"  # no "CUDA" the text does not say
    card = "the Mac's memory" if report.device in ("mps", "metal") else "the card"  # MPS shares the Mac's memory
    title = f"{oom_word}: other processes hold {held} of {card}" + (f": {named}" if named else "")
    if not pids and report.other_used is None and report.note == oom.CONTEXT_NOTE:
        title = f"{word} OOM before this program held any memory (its {word} context could not be created): other " \
                f"processes hold {card}"
    elif not pids and report.other_used is None and report.held:
        title = f"{oom_word}: {report.note}: other processes hold {card}"
    elif not pids and report.other_used is None:  # no numbers: the text's words say who held it (in the evidence)
        title = f"{oom_word}: memory held by another process, not this run -> free {card} (stop that process)" + \
            (f" or choose another GPU with {choose}" if choose else "")
    extra = [f"stop them ({lists})" + (f" or choose another GPU with {choose}" if choose else "")]
    return Advice("oom_other_process", ERROR, title, evidence + extra, {}, step)


_HOLDERS = {"cuda": ("nvidia-smi lists them; kill -9 a zombie", "CUDA_VISIBLE_DEVICES"),
            "xpu": ("xpu-smi ps lists the processes on each Intel GPU", "ZE_AFFINITY_MASK"),
            "mps": ("Activity Monitor's Memory tab lists what holds the Mac's memory", ""),
            "metal": ("Activity Monitor's Memory tab lists what holds the Mac's memory", ""),
            "tpu": ("a TPU VM runs one program per TPU: find the other with `sudo lsof -w /dev/accel*`", "")}
"""Per device: what lists the processes that hold its memory, and the variable that picks another GPU (a Mac has
one GPU, sharing the Mac's memory)."""


def _phase_advice(phase: str, step: int, r: Recipe | None, evidence: list[str], severity: str,
                  device: str = "cuda", ran: str = "") -> Advice:
    """OOM (or a jump toward it) in an eval or save phase, with that phase's settings to change."""
    text, change = _eval_move(r) if phase == "eval" else _save_move(r, device)
    if r is None and phase == "eval" and device == "metal":  # MLX has no Trainer's eval settings
        text = "lower the evaluation's batch size or the tokens it reads and generates per request"
    elif r is None and phase == "save" and ran == UNNAMED:  # the words name no GPU: the host's RAM as likely
        text, change = UNNAMED_SAVE_MOVE, {}
    what = "evaluation" if phase == "eval" else "checkpoint save"
    lead = f"{ran or DEVICE_WORD[device] + ' out of memory'} during {what}" if severity == ERROR else \
        f"VRAM jumps over the line during {what}"
    return Advice(f"oom_at_{phase}", severity, f"{lead}: {text}", evidence, change, step)


UNNAMED_SAVE_MOVE = ("save less at once (the adapter alone, or save_only_model = true, without the optimizer "
                     "state); if the GPU ran out, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets cached blocks "
                     "serve the save; if the host's RAM did (the process killed), it needs more RAM or swap")
"""A save's OOM that only words report, naming no GPU: the CUDA allocator's setting is one branch, not the move."""


def _eval_move(r: Recipe | None) -> Move:
    if r is None:
        return ("lower the evaluation's batch size (per_device_eval_batch_size); under the Trainer, "
                "eval_accumulation_steps also moves its outputs to the CPU as it goes"), {}
    t = r.training
    if t.per_device_eval_batch_size > 1:
        new = t.per_device_eval_batch_size // 2
        return (f"per_device_eval_batch_size {t.per_device_eval_batch_size} -> {new}",
                {"training.per_device_eval_batch_size": new})
    if t.eval_accumulation_steps is None:
        return ("set eval_accumulation_steps = 1 (move eval outputs to the CPU every step)",
                {"training.eval_accumulation_steps": 1})
    return "evaluate a smaller eval set or less often (eval batch is already 1)", {}

MERGE_MOVE = ("merging writes the base weights out in 16-bit, dequantizing a 4-bit base first: merge on the CPU "
              "(load the base with device_map='cpu') or on a larger card; unsloth's save_pretrained_merged takes "
              "maximum_memory_usage=0.5")
"""A merge needs the whole 16-bit model at once, however little training needed: the save settings do not help."""

HOST_MERGE_MOVE = ("the host ran out of RAM (not the GPU): a merge or save holds the whole 16-bit model in RAM, about "
                   "2 bytes per parameter: use a machine with more RAM or add swap, merge on the GPU (device_map="
                   "'auto'), or write smaller shards (max_shard_size='2GB')")

HOST_EVAL_MOVE = ("the host ran out of RAM (not the GPU): the evaluation gathers every prediction in RAM before "
                  "its metrics: set eval_accumulation_steps with a smaller eval set, or compute the metric per batch "
                  "instead of concatenating all outputs")


SLURM_MEM_MOVE = ("the Slurm job went over its memory limit (its cgroup's OOM killer, not the GPU): ask for more "
                  "(#SBATCH --mem or --mem-per-gpu), or hold less in RAM (fewer dataloader workers, a streamed dataset)")
HOST_TRAIN_MOVE = ("the host ran out of RAM (not the GPU): fewer dataloader workers, low_cpu_mem_usage when loading, "
                   "a smaller dataset in memory, or more swap")


HOST_TITLE = "Out of host memory"


def host_memory(item: Advice) -> bool:
    """Whether `item` says the host's RAM ran out (not a catch-all exception: the words read no GPU kind into it)."""
    return item.title.startswith(HOST_TITLE)


_LUAJIT = re.compile(oom.LUAJIT_OOM)
LUAJIT_MOVE = ("LuaJIT's own heap ran out (its limit, 1-2 GB in older builds, lies far below the machine's RAM): "
               "keep large data in torch tensors or tds, not Lua tables, use fewer loader threads, or build Torch with "
               "Lua 5.2")


def host_phase_advice(phase: str, line: str, phase_evidence: list[str], step: int) -> Advice:
    """The host's RAM ran out while the model was merged or saved (`DefaultCPUAllocator: can't allocate memory`,
    the kernel's `Killed`), or while an evaluation gathered its outputs."""
    if phase == "eval":
        return Advice("oom_at_eval", ERROR, f"{HOST_TITLE} during evaluation: {HOST_EVAL_MOVE}",
                      [line] + phase_evidence, {}, step)
    if phase == "save":
        return Advice("oom_at_save", ERROR, f"{HOST_TITLE} while saving or merging the model: {HOST_MERGE_MOVE}",
                      [line] + phase_evidence, {}, step)
    # no phase named: the run itself (loading, the loader's workers, a dataset held in memory)
    if _LUAJIT.search(line):
        return Advice("exception", ERROR, f"{HOST_TITLE}: {LUAJIT_MOVE}", [line] + phase_evidence, {}, step)
    if oom.SLURM_OOM.search(line):
        return Advice("exception", ERROR, f"{HOST_TITLE}: {SLURM_MEM_MOVE}", [line] + phase_evidence, {}, step)
    return Advice("exception", ERROR, f"{HOST_TITLE}: {HOST_TRAIN_MOVE}", [line] + phase_evidence, {}, step)


def _save_move(r: Recipe | None, device: str = "cuda") -> Move:
    if r is not None and not r.training.save_only_model:
        return ("set save_only_model = true (smaller saves; the optimizer state is not kept for resuming)",
                {"training.save_only_model": True})
    if device != "cuda":  # PYTORCH_CUDA_ALLOC_CONF reaches neither MPS's nor XPU's allocator
        return "free what the step left before the save (empty the device's cache), or save less often", {}
    return ("set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True so cached blocks can serve the save",
            {"env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})


def _jump_advice(f: Finding, r: Recipe | None) -> Advice:
    """A pre-OOM warning: an eval or save window crossed the line as a jump over the training peak."""
    phase = f.id.removeprefix("oom_at_")
    evidence = [f"training peak {gib(f.facts['train_peak'])}, {phase} peak {gib(f.facts['phase_peak'])}",
                f"warning line {gib(f.facts['line'])}", f"{phase} at step {f.step}"]
    return _phase_advice(phase, f.step, r, evidence, WARNING)


DEVICE_WORD = {"cuda": "CUDA", "mps": "MPS", "xpu": "XPU", "metal": "Apple GPU (Metal)", "tpu": "TPU"}
"""The device an OOM names, as its advice's title names it (logic/oom.py's OomReport.device)."""


def ran_out(report: oom.OomReport) -> str:
    """'CUDA out of memory', 'MPS out of memory', 'XPU out of memory': the OOM as an alert or the guard names it;
    'Out of memory' where only the person's words say it and they name no GPU (`the evaluation fails due to OOM`,
    `64G memory is not enough`): the host's RAM as likely as a card, and "CUDA" would be made up."""
    if report.said and report.device == "cuda" and not _DEVICE_NAMED.search(report.text):
        return UNNAMED
    return f"{DEVICE_WORD[report.device]} out of memory"


UNNAMED = "Out of memory"
_DEVICE_NAMED = re.compile(r"cuda|gpu|vram|\bhip\b|rocm|device|card|nvidia|torch|OutOfMemoryError|ResourceExhausted|"
                           r"video memory|graphics|\b(?:rtx|gtx|tesla|quadro)\b|显存|显卡", re.I)
"""Words that put an OOM on a device (or in a library that runs on one): the person's sentence then names it."""

XPU_CACHE_MOVE = ("set PYTORCH_ALLOC_CONF=expandable_segments:True (PyTorch's one allocator variable for every "
                  "accelerator, read by its XPU allocator in torch 2.13, whose XPU expandable segments came in late "
                  "2025, pytorch#166292; there is no PYTORCH_XPU_ALLOC_CONF), or call torch.xpu.empty_cache() between "
                  "phases (PyTorch's docs: it may reduce fragmentation), or lower the batch")
"""XPU's allocator setting, checked (2026-12-05): c10/core/AllocatorConfig.h says one `AcceleratorAllocatorConfig` serves
every accelerator, CUDA and XPU, from PYTORCH_ALLOC_CONF (PYTORCH_CUDA_ALLOC_CONF its older, lower-priority name);
torch 2.13's libc10 knows PYTORCH_ALLOC_CONF, PYTORCH_CUDA_ALLOC_CONF and PYTORCH_HIP_ALLOC_CONF and no XPU name, and
its XPU allocator's snapshot reports `expandable_segments` (c10/xpu/XPUCachingAllocator.h). XPU's expandable segments
were added by pytorch#166292 (October-November 2025); the first release with them was not pinned down, so the advice
names the version it was checked in and proposes no automatic change (an older torch may not read it for XPU)."""

MPS_CAP = ("PYTORCH_MPS_HIGH_WATERMARK_RATIO sets the cap (1.7 times the GPU's recommended working set by default, at "
           "most 2.0; 0.0 lifts it, as the message offers): a higher cap lets the run take memory macOS needs, and the "
           "Mac swaps, stalls or crashes (the message's 'may cause system failure'); using less memory is the safe fix")
"""What the MPS cap is and what raising it risks (PyTorch's aten/src/ATen/mps/MPSAllocator.h: default ratio 1.7 on
unified memory, upper bound 2.0, 0.0 for no limit)."""


def _mps_evidence(report: oom.OomReport) -> list[str]:
    """An MPS OOM's numbers: PyTorch's heaps, the other Metal allocations, the cap, and the cap's setting."""
    lines = []
    if report.reserved is not None and report.process_used is not None:
        lines.append(f"MPS allocated (PyTorch's heaps, its cache included): {gib(report.reserved)}; other Metal "
                     f"allocations: {gib(report.process_used - report.reserved)}")
    if report.allowed is not None:
        lines.append(f"the cap: {gib(report.allowed)} (max allowed); {MPS_CAP}")
    elif report.kind == oom.FULL:
        lines.append("no cap was set (PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0): the Mac's memory itself ran out, and no "
                     "setting gives more")
    return lines


def _full_words(report: oom.OomReport) -> str:
    """What a full device's title says: the request alone larger than the card, the MPS cap reached, or a full card."""
    if report.device == "metal":
        return "the Mac's memory ran out"
    if report.device == "mps":
        return f"the {gib(report.allowed)} cap was reached" if report.allowed is not None else \
            "the Mac's memory ran out, no cap set"
    if report.requested is not None and report.total is not None and report.requested > report.total:
        return f"it asked for {gib(report.requested)}, more than the card's {gib(report.total)}"
    return "the card is full"


_TF_TEXT = re.compile(r"bfc_allocator|GPU_\d+_bfc|ResourceExhausted|RESOURCE_EXHAUSTED|OOM when allocating", re.I)
"""TensorFlow's (or XLA's) allocator named in the message: its setting, not PyTorch's."""


def _allocator_setting(report: oom.OomReport) -> tuple[str, str]:
    """The environment setting that lets the allocator serve a request its fragmented cache could not: PyTorch's
    expandable segments; TensorFlow's CUDA async allocator (TensorFlow names it in its own hint); JAX's
    allocate-on-demand platform allocator."""
    if not _TF_TEXT.search(report.text):
        return "PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"
    if re.search(r"\bjax|xla_extension|XlaRuntimeError", report.text, re.I):
        return "XLA_PYTHON_CLIENT_ALLOCATOR", "platform"
    return "TF_GPU_ALLOCATOR", "cuda_malloc_async"
