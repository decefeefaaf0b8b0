"""Turning findings into advice: the moves, computed from the recipe alone."""

from __future__ import annotations

import math
import re
from typing import Any

from loratui.logic import oom
from loratui.logic.fmt import clip
from loratui.logic.advisor.advice import ERROR, GIB, INFO, MIB, WARNING, Advice, Finding, more_workers
from loratui.logic.advisor import cuda
from loratui.logic.advisor.guard import guard_advice
from loratui.logic.advisor.hang import hung_advice
from loratui.recipe import Recipe

# -- turning findings into advice: moves computed from the recipe ------------------------------------

Move = tuple[str, dict[str, Any]]
"""What to say and the change that does it."""
gib = oom.gib


def _memory_move(r: Recipe | None, phase: str = "", logits_gib: float = 0.0, priced: Any = None) -> Move:
    """The first memory saving that fits the recipe: liger where the logits are large (it costs no
    speed), then batch, checkpointing, length, and 4-bit. `logits_gib`: the estimate's logits term.
    `priced`: the estimator's top proposal (logic/priced_moves.py), which wins when there is one."""
    if priced is not None and phase != "load":
        return priced.describe(), dict(priced.change)
    if r is None:
        return "lower per_device_train_batch_size, then max_length, or enable gradient_checkpointing", {}
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
    if d.max_length > 512:
        return (f"lower max_length from {d.max_length} to {d.max_length // 2} (long samples get truncated)",
                {"data.max_length": d.max_length // 2})
    if not quantized:
        return _four_bit(r)
    return "batch 1, checkpointing and 4-bit are all in use: use a smaller model or a larger card", {}


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


def _lr_move(r: Recipe | None, lr_now: float | None, divisor: int = 3, share: str = "a third",
             said_by: str = "its last log") -> Move:
    """The configured learning rate over `divisor` (`share` says it in words), naming the current one. Without a
    recipe (a plain watched script, a pasted log) the rate is the script's own: loratui knows no value or key for
    it, only what `said_by` said (a log, or the person's text)."""
    if r is None:
        known = f"{said_by} said {_num(lr_now)}" if lr_now else "loratui does not know its value"
        return f"lower the learning rate your script sets, e.g. to {share} of it ({known})", {}
    lr = r.training.learning_rate
    new = float(f"{lr / divisor:.2g}")
    return f"lower learning_rate from {_num(lr)} to {_num(new)}", {"training.learning_rate": new}


COLLAPSE_LR_DIVISOR = 100
"""A collapse's learning rate over this: measured on real 40-step tiny CPU runs from 0.9, where a third (0.3), a
tenth (0.09), a thirtieth (0.03) and a fiftieth (0.018) still collapsed (loss ~5.45, grad_norm 0.003-0.05) and a
hundredth (0.009) trained (loss 6.57 -> 4.7, grad_norm 0.3-1; a two-hundredth, 0.0045: 3.6, near the recipe's own
3e-3 at 3.4): one apply must leave the collapse (tests/test_collapse.py)."""


def _num(value: float | None) -> str:
    return "?" if value is None else f"{value:.3g}"


# -- OOM ----------------------------------------------------------------------------------------------


def _oom_advice(f: Finding, r: Recipe | None, long_sample: tuple[int, int] | None = None,
                logits_gib: float = 0.0, priced: Any = None) -> list[Advice]:
    """The OOM as advice: where it happened (eval, save) and why (full, fragmented, a neighbour)."""
    report: oom.OomReport = f.facts["report"]
    phase, others = f.facts["phase"], f.facts["others"]
    kind = report.kind
    if kind in (oom.FULL, oom.UNKNOWN) and oom.others_to_blame(report, others):
        kind = oom.OTHER_PROCESS
    evidence = _oom_evidence(report, phase, f.step)
    built = []
    if phase == "save" and f.facts.get("merge"):
        built.append(Advice("oom_at_save", ERROR, f"CUDA out of memory while merging the adapter into the model: "
                            f"{MERGE_MOVE}", evidence, {}, f.step))
    elif phase in ("eval", "save"):
        built.append(_phase_advice(phase, f.step, r, evidence, ERROR))
    if kind == oom.OTHER_PROCESS:
        built.append(_other_process_advice(report, others, f.step, evidence))
    elif kind == oom.FRAGMENTATION:
        spare = f"{gib(report.reserved_unallocated)} reserved but unallocated; " \
            if report.reserved_unallocated is not None else ""
        name, value = oom.allocator_setting(report)
        built.append(Advice("oom_fragmentation", ERROR,
                            f"CUDA OOM from fragmentation: {spare}set {name}={value}",
                            evidence, {f"env.{name}": value}, f.step))
    elif long_sample is not None and phase not in ("eval", "save", "load"):
        built.append(_long_sample_advice(long_sample, r, evidence, f.step))
    elif phase not in ("eval", "save"):
        text, change = _memory_move(r, phase, logits_gib, priced)
        # "no usable numbers" beside evidence quoting the request and the free memory read as a contradiction
        where = ("while loading the model" if phase == "load" else "the card is full" if kind == oom.FULL
                 else "the message does not say what holds the memory" if report.total is not None
                 else "the message gives only the size it asked for" if report.requested is not None
                 else "the message gives no usable numbers")
        built.append(Advice("oom_full", ERROR, f"CUDA out of memory ({where}): {text}", evidence, change, f.step))
    return built


def _long_sample_advice(long_sample: tuple[int, int], r: Recipe | None, evidence: list[str],
                        step: int) -> Advice:
    """One batch far longer than the rest died: truncate rather than shrink every batch."""
    batch_len, typical = long_sample
    # Room for the usual batches with margin, rounded to 64; always below the batch that failed.
    cap = min(batch_len - 1, max(64, -(-int(typical * 1.5) // 64) * 64))
    if r is not None:
        cap = min(cap, r.data.max_length)
    facts = [f"the failing batch had sequences of {batch_len} tokens; a typical step's longest was {typical}"]
    return Advice("oom_full", ERROR,
                  f"CUDA out of memory at one long sample ({batch_len} tokens vs ~{typical} usually): "
                  f"truncate with max_length = {cap}", facts + evidence, {"data.max_length": cap}, step)


def _oom_evidence(report: oom.OomReport, phase: str, step: int) -> list[str]:
    """The OOM's numbers as short lines."""
    gpu = f"GPU {report.gpu}" if report.gpu is not None else "the GPU"
    rank = f"rank {report.rank}: " if report.rank is not None else ""
    where = {"eval": "during evaluation", "save": "while saving a checkpoint", "load": "while loading",
             "train": "in a training step"}.get(phase, "")
    when = ", ".join(part for part in (where, f"after step {step}" if step else "") if part)
    lines = [f"{rank}{when}"] if rank or when else []
    if report.requested is not None:
        lines.append(f"tried to allocate {gib(report.requested)} on {gpu}")
    if report.total is not None:
        lines.append(f"{gib(report.free)} free of {gib(report.total)} total")
    if report.allocated is not None:
        lines.append(f"PyTorch: {gib(report.allocated)} allocated, {gib(report.reserved_unallocated)} "
                     "reserved but unallocated")
    if report.other_used is not None and report.other_used >= GIB:
        lines.append(f"other than this process's PyTorch memory: {gib(report.other_used)} in use")
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
    title = f"CUDA OOM: other processes hold {held} of the card" + (f": {named}" if named else "")
    if not pids and report.other_used is None and report.note == oom.CONTEXT_NOTE:
        title = "CUDA OOM before this program held any memory (its CUDA context could not be created): other " \
                "processes hold the card"
    elif not pids and report.other_used is None and report.held:
        title = f"CUDA OOM: {report.note}: other processes hold the card"
    elif not pids and report.other_used is None:  # no numbers: the text's words say who held it (in the evidence)
        title = "CUDA OOM: memory held by another process, not this run -> free the card (stop that process) or " \
                "choose another GPU with CUDA_VISIBLE_DEVICES"
    extra = ["stop them (nvidia-smi lists them; kill -9 a zombie) or choose another GPU with CUDA_VISIBLE_DEVICES"]
    return Advice("oom_other_process", ERROR, title, evidence + extra, {}, step)


def _phase_advice(phase: str, step: int, r: Recipe | None, evidence: list[str], severity: str) -> Advice:
    """OOM (or a jump toward it) in an eval or save phase, with that phase's settings to change."""
    text, change = _eval_move(r) if phase == "eval" else _save_move(r)
    what = "evaluation" if phase == "eval" else "checkpoint save"
    lead = f"CUDA out of memory during {what}" if severity == ERROR else f"VRAM jumps over the line during {what}"
    return Advice(f"oom_at_{phase}", severity, f"{lead}: {text}", evidence, change, step)


def _eval_move(r: Recipe | None) -> Move:
    if r is None:
        return "lower per_device_eval_batch_size or set eval_accumulation_steps", {}
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


def host_phase_advice(phase: str, line: str, phase_evidence: list[str], step: int) -> Advice:
    """The host's RAM ran out while the model was merged or saved (`DefaultCPUAllocator: can't allocate memory`,
    the kernel's `Killed`), or while an evaluation gathered its outputs."""
    if phase == "eval":
        return Advice("oom_at_eval", ERROR, f"Out of host memory during evaluation: {HOST_EVAL_MOVE}",
                      [line] + phase_evidence, {}, step)
    return Advice("oom_at_save", ERROR, f"Out of host memory while saving or merging the model: {HOST_MERGE_MOVE}",
                  [line] + phase_evidence, {}, step)


def _save_move(r: Recipe | None) -> Move:
    if r is not None and not r.training.save_only_model:
        return ("set save_only_model = true (smaller saves; the optimizer state is not kept for resuming)",
                {"training.save_only_model": True})
    return ("set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True so cached blocks can serve the save",
            {"env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})


def _jump_advice(f: Finding, r: Recipe | None) -> Advice:
    """A pre-OOM warning: an eval or save window crossed the line as a jump over the training peak."""
    phase = f.id.removeprefix("oom_at_")
    evidence = [f"training peak {gib(f.facts['train_peak'])}, {phase} peak {gib(f.facts['phase_peak'])}",
                f"warning line {gib(f.facts['line'])}", f"{phase} at step {f.step}"]
    return _phase_advice(phase, f.step, r, evidence, WARNING)


# -- VRAM, loss, memory, data -------------------------------------------------------------------------


def _vram_advice(f: Finding, r: Recipe | None, logits_gib: float = 0.0, priced: Any = None) -> Advice:
    """Over the warning line: the first memory saving that fits the recipe."""
    facts = f.facts
    text, change = _memory_move(r, logits_gib=logits_gib, priced=priced)
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


def _nan_advice(f: Finding, r: Recipe | None) -> Advice:
    facts = f.facts
    # Step 0 from the text reader (no `names`) is a paste's or a script's unknown step, not the first one.
    step = f.step if f.step or "names" in facts else None
    at = f" at step {step}" if step is not None else ""
    text, change = _nan_move(r, facts.get("lr"), facts.get("names", []), step,
                             "the text" if facts.get("lr_said") else "its last log")
    if facts.get("fp16_scale") and r is None:
        text = "the run is fp16 (its loss scaler reports overflows): switch fp16 to bf16 on an Ampere or newer " \
            "card, else lower learning_rate"
    if facts.get("fp16_floor"):
        text = "fp16 overflows at every step (the loss scaler gave up): switch fp16 to bf16 on an Ampere or " \
            "newer card, else lower learning_rate"
        change = {"training.fp16": False, "training.bf16": True} if r is not None and r.training.fp16 else {}
    evidence = [f"first non-finite {facts['what']}{at}: {facts['value']}"]
    if facts.get("filtered"):
        evidence.append(f"logged as 'loss': 0.0 beside grad_norm {facts['filtered']}: transformers' "
                        "logging_nan_inf_filter logs 0.0 for a window of NaN steps, not a zero loss")
    if facts.get("quote"):
        evidence.append(facts["quote"])
    if facts.get("why"):
        evidence.append(facts["why"])
    if facts.get("streak", 1) > 1:
        evidence.append(f"{facts['streak']} logs in a row")
    if facts.get("fp16_scale") and facts["fp16_scale"] != facts.get("quote"):
        evidence.append(facts["fp16_scale"])
    if r is not None:
        t = r.training
        precision = "bf16" if t.bf16 else "fp16" if t.fp16 else "fp32"
        evidence.append(f"optim = {t.optim}, gradient_checkpointing = {str(t.gradient_checkpointing).lower()}, "
                        f"{precision}, learning_rate = {_num(t.learning_rate)}")
    return Advice("nan_loss", ERROR, f"{facts['what']} became {facts['value']}{at}: {text}",
                  evidence, change, f.step)


_NO_BF16 = re.compile(r"V100|\bT4\b|P100|P40|\bP4\b|K80|M40|M60|GTX|RTX 20\d\d|Quadro RTX|TITAN (?:V|RTX|Xp)", re.I)


def _nan_move(r: Recipe | None, lr_now: float | None, names: list[str], step: int | None = None,
              said_by: str = "its last log") -> Move:
    """8-bit optimizer first (a known NaN source), then fp16 -> bf16, then a lower learning rate. `step` None: not
    known (a paste that names none), so no claim about the first step."""
    if r is None:
        first = step is not None and step <= 1
        if first or lr_now == 0.0 or lr_now is not None and lr_now < 1e-6:
            # A third of a rate this small changes nothing: the NaN has another cause.
            why = "it is non-finite from the first step" if first else f"learning_rate is only {lr_now:.3g}"
            return (f"not the learning rate ({why}): check the precision (bf16 rather than fp16), the inputs and "
                    "the labels", {})
        return _lr_move(None, lr_now, said_by=said_by)
    t, q = r.training, r.quantization
    if "8bit" in t.optim:
        why = " with gradient checkpointing" if t.gradient_checkpointing else ""
        return (f"switch optim from {t.optim} to adamw_torch (8-bit optimizers{why} can turn the loss NaN)",
                {"training.optim": "adamw_torch"})
    if t.fp16 and not any(_NO_BF16.search(n) for n in names):
        change: dict[str, Any] = {"training.fp16": False, "training.bf16": True}
        if q.load_in_4bit and q.bnb_4bit_compute_dtype == "float16":
            change["quantization.bnb_4bit_compute_dtype"] = "bfloat16"
        return "switch fp16 to bf16 (fp16 overflows; bf16 needs an Ampere or newer card)", change
    return _lr_move(r, lr_now)


_CHECK = "check the labels (answer tokens kept, prompt and padding -100), the attention mask, and the chat template"


def _flat_advice(f: Finding, r: Recipe | None) -> Advice:
    facts = f.facts
    quote = [facts["quote"]] if facts.get("quote") else []
    change: dict[str, Any] = {}
    if facts["kind"] == "low":
        median = sorted(facts["losses"])[2]
        title = f"Loss is near zero from the start ({median:.3g}): the labels are likely wrong"
        evidence = ["first losses: " + ", ".join(f"{v:.3g}" for v in facts["losses"])] + quote + [
            _CHECK, "and that the answer is not also in the input"]
    elif facts["kind"] == "zero_grad":
        lr = " and learning_rate 0" if facts.get("lr_zero") else ""
        title = f"grad_norm is 0{lr} in {facts['zeros']} of the first {facts['n']} logs: nothing is training"
        evidence = quote + [_CHECK, "and that lora target_modules name layers the model has"]
        if facts.get("lr_zero"):
            evidence.append("learning_rate is 0 in every log so far: check the scheduler and warmup (a DeepSpeed "
                            "config's scheduler overrides the Trainer's)")
    elif facts["kind"] == "zero_lr":
        title = f"learning_rate is 0 in {facts['n']} logs in a row: nothing is training"
        evidence = quote + ["check the scheduler and warmup (a DeepSpeed config's scheduler overrides the "
                            "Trainer's; a schedule shorter than the run ends at 0; --scale_lr or a resumed "
                            "scheduler can set it to 0)"]
    elif facts["kind"] == "repeat":
        same = f"stays at {facts['value']:g}" if facts["distinct"] <= 2 else \
            f"repeats: {facts['repeats']} of the last {facts['n']} values were seen before"
        title = f"Loss {same}: the weights are not changing"
        evidence = quote + ["the same losses coming back exactly mean the same outputs: the optimizer does not "
                            "update the trained weights (frozen or detached parameters, a zero or tiny learning "
                            "rate, or the same batches with no update)"]
        if facts.get("lr") is not None and facts["lr"] < 1e-8:
            evidence.append(f"the learning rate is {facts['lr']:.3g}: still warming up, or set far too low")
    elif facts["kind"] == "chance":
        title = f"Loss sits at ln {facts['k']} = {math.log(facts['k']):.4f} ({facts['value']:g}) for {facts['n']} " \
            f"logs from step {facts['from_step']}: a uniform guess over {facts['k']} classes, nothing is learned"
        evidence = quote + ["ln k is the cross-entropy of predicting every one of k classes alike: the outputs do "
                            "not depend on the input (labels, a frozen or detached head, a learning rate far off)"]
    elif facts["kind"] == "eval_unchanged":
        title = f"The evaluation loss does not move ({facts['mean']:.4g} ± {facts['spread'] / facts['mean']:.2%} over " \
            f"{facts['n']} evaluations from epoch {facts['from_epoch']:g}): the model is not learning"
        evidence = quote + [
            "an evaluation scores the same data each time, so a model that learns moves its loss by more than that",
            "check the learning rate first: too low for this model (small or static-embedding models and fresh heads "
            "often need 10-100x the default), then that the trained parameters are in the optimizer", _CHECK]
        if facts.get("lr") is not None:
            evidence.insert(1, f"logged learning_rate {facts['lr']:.3g}")
    elif facts["kind"] == "collapse":
        title, evidence, change = _collapse_advice(facts, r, quote)
    elif facts["kind"] == "said":
        title = "Loss does not move, in the log's own words: check that the model trains at all"
        evidence = quote + [
            "a loss that stays put means the weights do not change, or change nothing the loss scores: check that "
            "the learning rate is not 0 (a scheduler, --scale_lr or a resumed schedule can set it), that the "
            "trained parameters have requires_grad and are in the optimizer, and that optimizer.zero_grad() and "
            "optimizer.step() run every step", _CHECK]
    elif facts["kind"] == "objective":
        what = {"rl": "every completion of a prompt got the same reward: zero advantage, no gradient signal "
                      "(check the reward functions on a few completions; raise num_generations or the "
                      "sampling temperature)",
                "preference": "the policy has not moved from the reference model (check that the adapter "
                              "trains: learning_rate, beta, and that chosen and rejected differ)"}[facts["objective"]]
        title = f"{facts['metric']} is {facts['value']:g} for {facts['n']} logs from step {facts['from_step']}: " \
            "nothing is being learned"
        evidence = quote + [what, "a GRPO/DPO loss near zero or below it is normal: judged by its own metrics"]
    else:
        spread = facts["spread"] / facts["mean"]
        title = f"Loss is flat from the start ({facts['mean']:.5g} ± {spread:.1%}): check the data"
        evidence = [f"steps {facts['from_step']}-{facts['to_step']}: range {facts['spread']:.3g}", _CHECK]
        if r is not None and r.training.learning_rate < 1e-5:
            change = {"training.learning_rate": 2e-4}
            evidence.append(f"learning_rate = {_num(r.training.learning_rate)} is far below LoRA's usual 1e-4 to 3e-4")
    return Advice("loss_flat", WARNING, title, evidence, change, f.step)


def _collapse_advice(facts: dict[str, Any], r: Recipe | None, quote: list[str]) -> tuple[str, list[str], dict[str, Any]]:
    """A loss stuck high with its gradient gone (LossWatch._collapse): the learning rate threw the model off."""
    text, change = _lr_move(r, facts.get("lr"), COLLAPSE_LR_DIVISOR, "a hundredth")  # a third still collapsed
    uniform = math.log(facts["vocab"])
    title = f"Loss stuck at {facts['value']:.3g} from step {facts['from_step']} with grad_norm ~{facts['grad']:.2g}: " \
        f"the model collapsed, {text}"
    evidence = quote + [
        f"{facts['value']:.3g} is {facts['value'] / uniform:.0%} of ln {facts['vocab']} = {uniform:.2f}, a uniform "
        f"guess over the model's vocabulary: it fell only from {facts['first']:.3g} and stays there",
        f"grad_norm median {facts['grad']:.2g} over the last {facts['n']} logs, {facts['grad_before']:.2g} in the "
        "first ones: the updates left the outputs barely depending on the input, the mark of a learning rate far "
        "too high", "a hundredth, not a third: on loratui's tiny recipe, collapsed at 0.9, a third, a tenth, a "
        "thirtieth and a fiftieth of it still collapsed; a hundredth trained"]
    if facts.get("lr") is not None:
        evidence.append(f"learning_rate now {_num(facts['lr'])}")
    return title, evidence, change


def _zero_advice(f: Finding, r: Recipe | None) -> Advice:
    """The loss printed as exactly 0: the model predicts nothing it is scored on, or fp16 broke."""
    facts = f.facts
    if facts["kind"] == "cliff":
        title = f"Loss collapsed to 0 at step {f.step} (it was {facts['before']:.4g} at step {facts['before_step']})"
    elif facts["kind"] == "said":
        title = "Loss is 0, in the log's own words: nothing is being scored"
    else:
        title = f"Loss is 0 from the first logs (step {facts['from_step']}): nothing is being scored"
    fp16 = r is None or r.training.fp16  # unknown precision: fp16 stays a possible cause
    evidence = ([facts["quote"]] if facts.get("quote") else []) + [
        "a loss of exactly 0 means no tokens are scored (every label -100: prompts longer than the maximum length "
        "leave no answer tokens)" + (" or the forward pass broke (fp16 overflow)" if fp16 else ""),
        "or the loss went NaN: transformers logs 0.0 for a window of NaN steps (logging_nan_inf_filter); "
        "a nan grad_norm beside it says so"]
    change: dict[str, Any] = {}
    if r is not None and r.training.fp16:
        change = {"training.fp16": False, "training.bf16": True}
        evidence.append("this run uses fp16: switch to bf16 on an Ampere or newer card")
    elif r is None:
        evidence.append("under fp16, try bf16 (bf16 = true in TrainingArguments or the YAML); check that samples "
                        "fit the maximum length (cutoff_len / max_seq_length)")
    return Advice("loss_zero", WARNING, title, evidence, change, f.step)


def _diverging_advice(f: Finding, r: Recipe | None) -> Advice:
    facts = f.facts
    text, change = _lr_move(r, facts.get("lr"))
    lora = r.lora if r is not None else None
    if lora is not None and not lora.use_rslora and lora.lora_alpha > 2 * lora.r:
        text = f"lower lora_alpha from {lora.lora_alpha:g} to {2 * lora.r} (alpha/r = {lora.lora_alpha / lora.r:g})"
        change = {"lora.lora_alpha": 2 * lora.r}
    quote = [facts["quote"]] if facts.get("quote") else []
    lr = [f"learning rate at step {f.step}: {_num(facts.get('lr'))}"] if facts.get("lr") is not None else []
    if facts.get("kind") == "huge":
        sizes = [f"{name} {facts[key]:.3g}" for name, key in (("loss", "now"), ("grad_norm", "grad"))
                 if facts.get(key) is not None and facts[key] == facts[key]]
        evidence = quote + [f"{' and '.join(sizes)} at step {f.step}: no loss on real data is that large, and a "
                            "healthy gradient norm is 0.01 to a few hundred: the updates blew up"]
        return Advice("loss_diverging", ERROR, f"Loss exploded ({', '.join(sizes)}): {text}; keep max_grad_norm "
                      "(gradient clipping) on", evidence + lr, change, f.step)
    if facts.get("kind") == "spike":
        grad = facts.get("grad")
        evidence = quote + [f"loss {facts['now']:.4g} at step {f.step} against about {facts['before']:.3g} before"]
        if grad is not None and grad != grad:
            evidence.append("grad_norm is nan in the same log: the update blew up, not the data")
        severity = ERROR if facts.get("error") else WARNING
        return Advice("loss_diverging", severity, f"Loss exploded ({facts['before']:.3g} -> {facts['now']:.4g}): "
                      f"{text}; keep max_grad_norm (gradient clipping) on", evidence + lr, change, f.step)
    window = facts.get("window", 10)
    if facts.get("kind") == "creep":
        evidence = quote + [f"grad_norm spiked to {facts['grad']:.4g} at step {facts['best_step']}; the loss rose "
                            f"in each of the {window} logs since, {facts['best']:.3g} -> {facts['now']:.3g}"] + lr
    elif facts.get("kind") == "said":
        evidence = quote + ["the log says the loss rises: a learning rate too high for the data is the usual cause"]
        severity = ERROR if facts.get("nan_step") is not None else WARNING
        if facts.get("nan_step") is not None:
            evidence.append(f"then {facts['nan_what']} became nan at step {facts['nan_step']}: the rise ran away")
        return Advice("loss_diverging", severity, f"Loss rising, in the log's own words: {text}", evidence,
                      change, f.step)
    elif facts.get("kind") == "shift":
        p = facts["p"]
        chance = f"{p:.1%} of the time" if p >= 0.001 else "never"
        evidence = quote + [f"the {window} logs since step {facts['best_step']} sit at a median of {facts['now']:.4g} "
                            f"against {facts['best']:.4g} over the {facts['before_n']} logs before: a third higher, "
                            f"and the same logs shuffled show as large a change of level {chance}"] + lr
    elif facts.get("kind") == "epoch_jump":
        evidence = quote + [f"the loss averaged over epoch {facts['epoch']:g} is {facts['now']:.4g} against "
                            f"{facts['best']:.4g} over the epoch before: an epoch's average has no batch noise to "
                            "double it, the weights broke (check the validation loss and accuracy beside it)"] + lr
    elif facts.get("kind") == "climb":
        evidence = quote + [f"the loss fell from {facts['first']:.4g} to {facts['best']:.4g} at step "
                            f"{facts['best_step']}, then rose in each of the {window} logs since, back past where it "
                            f"started: a climb, not one noisy log"] + lr
    elif facts.get("kind") == "step":
        evidence = quote + [f"every one of the {window} logs since step {facts['best_step']} (lowest "
                            f"{facts['floor']:.4g}) is a third above every log before it (highest "
                            f"{facts['ceiling']:.4g}): a new, higher level, not one noisy log"] + lr
    else:
        p = facts.get("p")
        beyond = "" if "p" not in facts else " and more than doubled" if p is None else \
            f"; the same logs shuffled rise as far {p:.1%} of the time" if p >= 0.001 else "; no shuffle rises as far"
        evidence = quote + [f"a trend over the {window} logs since step {facts['best_step']} (Theil-Sen line "
                            f"{facts['best']:.3g} -> {facts['now']:.3g}; Mann-Kendall{beyond}: not noise)"] + lr
    severity = WARNING
    if facts.get("nan_step") is not None:
        evidence.append(f"then {facts['nan_what']} became nan at step {facts['nan_step']}: the rise ran away")
        severity = ERROR
    return Advice("loss_diverging", severity, f"Loss is rising ({_rise_span(facts)}): {text}", evidence, change, f.step)


def _rise_span(facts: dict[str, Any]) -> str:
    """The rise in the logged values a person can find in their log (the fitted line's ends are in the evidence:
    a title that says `0.825 -> 2.73` above a log that reads 1.1 ... 3.1 looks like a misreading)."""
    logged = facts.get("logged")  # absent in a finding folded by an older version
    first, last = logged if logged else (facts["best"], facts["now"])
    return f"{first:.4g} -> {last:.4g}"


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
    if f.id == "flash_attn_unavailable":
        change = {"model.attn_implementation": "sdpa"}
        if r is not None and r.model.attn_implementation != "flash_attention_2":
            change = {}
        return Advice(f.id, ERROR, "flash-attention cannot be used here: use attn_implementation = \"sdpa\"",
                      [line, "sdpa needs no extra package and is close in speed"], change, f.step)
    return _cuda_error_advice(f, line)


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
)


_NCCL = re.compile(r"NCCL error|NCCL communicator", re.I)


def _nccl_advice(f: Finding, line: str) -> Advice:
    """A collective timed out or NCCL failed: one rank stalled, died or went its own way."""
    evidence = [line, "one rank stopped joining collectives: find the first error in the other ranks' output",
                "work done by one rank alone (uneven data, eval or save on rank 0 only) trips the same timeout"]
    return Advice("cuda_error", ERROR, "NCCL failed: rerun with NCCL_DEBUG=INFO",
                  evidence, {"env.NCCL_DEBUG": "INFO"}, f.step)


def _cuda_error_advice(f: Finding, line: str) -> Advice:
    setup = cuda.setup_advice(f, line)  # CUDA that cannot start: the driver, the build, the GPU
    if setup is not None:
        return setup
    if _NCCL.search(line):
        return _nccl_advice(f, line)
    hint = next((text for key, text in _CUDA_HINTS if key in line), "") or cuda.fault_hint(line)
    change: dict[str, Any] = {"env.CUDA_LAUNCH_BLOCKING": "1"}
    if "no kernel image" in line:
        change = {}
    evidence = [line] + ([hint] if hint else [])
    if change:
        evidence.append("the op named in an asynchronous CUDA error is often the wrong one; "
                        "CUDA_LAUNCH_BLOCKING=1 makes the traceback point at the failing op")
    title = f"CUDA error: {hint.split(':')[0]}" if hint else "CUDA error: rerun with CUDA_LAUNCH_BLOCKING=1"
    return Advice("cuda_error", ERROR, title, evidence, change, f.step)


_BUILDERS = {
    "oom_at_eval": _jump_advice, "oom_at_save": _jump_advice, "nan_loss": _nan_advice,
    "loss_flat": _flat_advice, "loss_zero": _zero_advice, "loss_diverging": _diverging_advice, "memory_leak": _leak_advice,
    "rank_imbalance": _rank_advice,
    "bnb_setup": _setup_advice, "flash_attn_unavailable": _setup_advice, "cuda_error": _setup_advice,
    "run_hung": hung_advice, "guard": guard_advice,
}

