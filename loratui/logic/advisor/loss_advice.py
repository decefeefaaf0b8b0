"""The advice for a loss that went wrong: non-finite (NaN, inf), flat or at chance, near zero, or rising; each with the
move the recipe allows (a lower learning rate, bf16 for fp16) and what to check in the data."""

from __future__ import annotations

import math
import re
from typing import Any

from loratui.logic.advisor.advice import ERROR, INFO, WARNING, Advice, Finding
from loratui.logic.advisor.moves import COLLAPSE_LR_DIVISOR, Move, lr_move, lr_text
from loratui.recipe import Recipe

_NO_BF16 = re.compile(r"V100|\bT4\b|P100|P40|\bP4\b|K80|M40|M60|GTX|RTX 20\d\d|Quadro RTX|TITAN (?:V|RTX|Xp)", re.I)


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
        dtype = r.model.dtype  # with neither mixed precision, the weights' own dtype is the precision trained in
        precision = "bf16" if t.bf16 else "fp16" if t.fp16 else "fp32" if dtype == "float32" else \
            f"{dtype} weights (no fp16/bf16 mixed precision)"
        evidence.append(f"optim = {t.optim}, gradient_checkpointing = {str(t.gradient_checkpointing).lower()}, "
                        f"{precision}, learning_rate = {lr_text(t.learning_rate)}")
    return Advice("nan_loss", ERROR, f"{facts['what']} became {facts['value']}{at}: {text}",
                  evidence, change, f.step)


def _nan_move(r: Recipe | None, lr_now: float | None, names: list[str], step: int | None = None,
              said_by: str = "its last log") -> Move:
    """8-bit optimizer first (a known NaN source), then fp16 -> bf16, then float16 weights trained with no mixed
    precision -> bf16/fp32 weights, then a lower learning rate. `step` None: not
    known (a paste that names none), so no claim about the first step."""
    if r is None:
        first = step is not None and step <= 1
        if first or lr_now == 0.0 or lr_now is not None and lr_now < 1e-6:
            # A third of a rate this small changes nothing: the NaN has another cause.
            why = "it is non-finite from the first step" if first else f"learning_rate is only {lr_now:.3g}"
            return (f"not the learning rate ({why}): check the precision (bf16 rather than fp16), the inputs and "
                    "the labels", {})
        return lr_move(None, lr_now, said_by=said_by)
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
    if r.model.dtype == "float16" and not t.fp16 and not t.bf16:
        # Weights in float16 with no mixed precision: nothing scales the loss and float16's range overflows, at any
        # rate. Measured on tiny (CPU, 10 steps): float16 at 0.9, 0.3 and 0.1 each NaN at step 4, so a third of the
        # rate at each apply looped; bfloat16 and float32 at 0.9 both finite. bf16 where the card has it, else fp32.
        target = "bfloat16" if names and not any(_NO_BF16.search(n) for n in names) else "float32"
        return (f"switch model.dtype from float16 to {target} (float16 weights with no fp16/bf16 mixed precision: "
                "nothing scales the loss against float16's narrow range)", {"model.dtype": target})
    return lr_move(r, lr_now)

_CHECK = "check the labels (answer tokens kept, prompt and padding -100), the attention mask, and the chat template"


Said = tuple[str, list[str], dict[str, Any]]
"""An advice's title, evidence and change."""


def _flat_advice(f: Finding, r: Recipe | None) -> Advice:
    facts = f.facts
    quote = [facts["quote"]] if facts.get("quote") else []
    title, evidence, change = _FLAT_KINDS.get(facts["kind"], _flat_from_start)(facts, r, quote)
    return Advice("loss_flat", WARNING, title, evidence, change, f.step)


def _flat_low(facts: dict[str, Any], r: Recipe | None, quote: list[str]) -> Said:
    median = sorted(facts["losses"])[2]
    title = f"Loss is near zero from the start ({median:.3g}): the labels are likely wrong"
    evidence = ["first losses: " + ", ".join(f"{v:.3g}" for v in facts["losses"])] + quote + [
        _CHECK, "and that the answer is not also in the input"]
    return title, evidence, {}


def _flat_zero_grad(facts: dict[str, Any], r: Recipe | None, quote: list[str]) -> Said:
    lr = " and learning_rate 0" if facts.get("lr_zero") else ""
    title = f"grad_norm is 0{lr} in {facts['zeros']} of the first {facts['n']} logs: nothing is training"
    evidence = quote + [_CHECK, "and that lora target_modules name layers the model has"]
    if facts.get("lr_zero"):
        evidence.append("learning_rate is 0 in every log so far: check the scheduler and warmup (a DeepSpeed "
                        "config's scheduler overrides the Trainer's)")
    return title, evidence, {}


def _flat_zero_lr(facts: dict[str, Any], r: Recipe | None, quote: list[str]) -> Said:
    title = f"learning_rate is 0 in {facts['n']} logs in a row: nothing is training"
    evidence = quote + ["check the scheduler and warmup (a DeepSpeed config's scheduler overrides the "
                        "Trainer's; a schedule shorter than the run ends at 0; --scale_lr or a resumed "
                        "scheduler can set it to 0)"]
    return title, evidence, {}


def _flat_repeat(facts: dict[str, Any], r: Recipe | None, quote: list[str]) -> Said:
    same = f"stays at {facts['value']:g}" if facts["distinct"] <= 2 else \
        f"repeats: {facts['repeats']} of the last {facts['n']} values were seen before"
    title = f"Loss {same}: the weights are not changing"
    evidence = quote + ["the same losses coming back exactly mean the same outputs: the optimizer does not "
                        "update the trained weights (frozen or detached parameters, a zero or tiny learning "
                        "rate, or the same batches with no update)"]
    if facts.get("lr") is not None and facts["lr"] < 1e-8:
        evidence.append(f"the learning rate is {facts['lr']:.3g}: still warming up, or set far too low")
    return title, evidence, {}


def _flat_chance(facts: dict[str, Any], r: Recipe | None, quote: list[str]) -> Said:
    title = f"Loss sits at ln {facts['k']} = {math.log(facts['k']):.4f} ({facts['value']:g}) for {facts['n']} " \
        f"logs from step {facts['from_step']}: a uniform guess over {facts['k']} classes, nothing is learned"
    evidence = quote + ["ln k is the cross-entropy of predicting every one of k classes alike: the outputs do "
                        "not depend on the input (labels, a frozen or detached head, a learning rate far off)"]
    return title, evidence, {}


def _flat_eval(facts: dict[str, Any], r: Recipe | None, quote: list[str]) -> Said:
    title = f"The evaluation loss does not move ({facts['mean']:.4g} ± {facts['spread'] / facts['mean']:.2%} over " \
        f"{facts['n']} evaluations from epoch {facts['from_epoch']:g}): the model is not learning"
    evidence = quote + [
        "an evaluation scores the same data each time, so a model that learns moves its loss by more than that",
        "check the learning rate first: too low for this model (small or static-embedding models and fresh heads "
        "often need 10-100x the default), then that the trained parameters are in the optimizer", _CHECK]
    if facts.get("lr") is not None:
        evidence.insert(1, f"logged learning_rate {facts['lr']:.3g}")
    return title, evidence, {}


def _flat_said(facts: dict[str, Any], r: Recipe | None, quote: list[str]) -> Said:
    if facts.get("what") == "reward":
        title = "The reward does not grow, in the log's own words: nothing is being learned"
        return title, quote + [
            "the reward is an RL objective's own measure; one that stays at 0 or never rises gives no advantage and "
            "no gradient signal: check the reward functions on a few completions (a completion cut off at the "
            "maximum length before its answer scores 0), then the learning rate and that the adapter trains",
            _CHECK], {}
    title = "Loss does not move, in the log's own words: check that the model trains at all"
    evidence = quote + [
        "a loss that stays put means the weights do not change, or change nothing the loss scores: check that "
        "the learning rate is not 0 (a scheduler, --scale_lr or a resumed schedule can set it), that the "
        "trained parameters have requires_grad and are in the optimizer, and that optimizer.zero_grad() and "
        "optimizer.step() run every step", _CHECK]
    return title, evidence, {}


def _flat_objective(facts: dict[str, Any], r: Recipe | None, quote: list[str]) -> Said:
    what = {"rl": "every completion of a prompt got the same reward: zero advantage, no gradient signal "
                  "(check the reward functions on a few completions; raise num_generations or the "
                  "sampling temperature)",
            "preference": "the policy has not moved from the reference model (check that the adapter "
                          "trains: learning_rate, beta, and that chosen and rejected differ)"}[facts["objective"]]
    title = f"{facts['metric']} is {facts['value']:g} for {facts['n']} logs from step {facts['from_step']}: " \
        "nothing is being learned"
    evidence = quote + [what, "a GRPO/DPO loss near zero or below it is normal: judged by its own metrics"]
    return title, evidence, {}


def _flat_from_start(facts: dict[str, Any], r: Recipe | None, quote: list[str]) -> Said:
    spread = facts["spread"] / facts["mean"]
    title = f"Loss is flat from the start ({facts['mean']:.5g} ± {spread:.1%}): check the data"
    evidence = [f"steps {facts['from_step']}-{facts['to_step']}: range {facts['spread']:.3g}", _CHECK]
    change: dict[str, Any] = {}
    if r is not None and r.training.learning_rate < 1e-5:
        # the title names the move the change makes: `apply` sets what the title says, the data comes after
        rate = 2e-4
        change = {"training.learning_rate": rate}
        now = lr_text(r.training.learning_rate)
        title = f"Loss is flat from the start ({facts['mean']:.5g} ± {spread:.1%}): raise " \
            f"learning_rate from {now} to {rate:g}"
        evidence.insert(1, f"learning_rate = {now} is far below LoRA's usual 1e-4 to 3e-4; if the loss "
                           "stays flat at 2e-4, the data:")
    return title, evidence, change


def _flat_still(facts: dict[str, Any], r: Recipe | None, quote: list[str]) -> Said:
    """Three training logs within 0.01 % of each other (FlatWatch._stands_still): the output ignores the input."""
    title = (f"Loss stands still at {facts['mean']:.6g} (within {facts['spread'] / facts['mean']:.3%} over "
             f"{facts['n']} logs, steps {facts['from_step']}-{facts['to_step']}): the model's output no longer depends "
             "on its input; most often a learning rate too high threw it there")
    evidence = quote + [
        "a training loss is a mean over different batches each log: a model that still reads its input scores "
        "them differently by far more than this",
        "lower the learning rate (a tenth) and restart from the start or the last checkpoint before it stood still; "
        "if it stands still from the first logs, check the labels and that the trained parameters get gradients"]
    if facts.get("lr") is not None:
        evidence.append(f"learning_rate now {lr_text(facts['lr'])}")
    return title, evidence, {}


def _collapse_advice(facts: dict[str, Any], r: Recipe | None, quote: list[str]) -> Said:
    """A loss stuck high with its gradient gone (LossWatch._collapse): the learning rate threw the model off."""
    text, change = lr_move(r, facts.get("lr"), COLLAPSE_LR_DIVISOR, "a hundredth")  # a third still collapsed
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
        evidence.append(f"learning_rate now {lr_text(facts['lr'])}")
    return title, evidence, change


_FLAT_KINDS = {"low": _flat_low, "zero_grad": _flat_zero_grad, "zero_lr": _flat_zero_lr, "repeat": _flat_repeat,
               "chance": _flat_chance, "eval_unchanged": _flat_eval, "collapse": _collapse_advice, "said": _flat_said,
               "objective": _flat_objective, "still": _flat_still}
"""What a flat loss of each kind says (any other kind: flat from the start)."""


def _zero_advice(f: Finding, r: Recipe | None) -> Advice:
    """The loss printed as exactly 0: the model predicts nothing it is scored on, or fp16 broke."""
    facts = f.facts
    if facts["kind"] == "cliff":
        title = f"Loss collapsed to 0 at step {f.step} (it was {facts['before']:.4g} at step {facts['before_step']})"
    elif facts["kind"] == "lone":
        title = f"Loss is 0 in the text's only log (step {f.step}): nothing is being scored"
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
    text, change = _rise_move(r, facts.get("lr"))
    quote = [facts["quote"]] if facts.get("quote") else []
    lr = [f"learning rate at step {f.step}: {lr_text(facts.get('lr'))}"] if facts.get("lr") is not None else []
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
    if facts.get("kind") == "prefers_rejected":
        return _prefers_rejected_advice(f, r)
    if facts.get("kind") == "said" and facts.get("overfit"):
        return Advice("loss_diverging", WARNING, "Validation loss rising, in the log's own words: overfitting -> keep "
                      "the checkpoint of the best evaluation (load_best_model_at_end with metric_for_best_model "
                      "eval_loss), train fewer epochs, or add data or regularisation (lora_dropout, weight_decay)",
                      quote + ["the log says the validation loss rises: the model fits its training data ever "
                               "closer and generalises worse; a metric that still improves (accuracy, WER) would "
                               "say otherwise"], {}, f.step)
    if facts.get("kind") == "said":
        evidence = quote + ["the log says the loss rises: a learning rate too high for the data is the usual cause"]
        title = f"Loss rising, in the log's own words: {text}"
    else:
        evidence = quote + [_rise_shown(facts)] + lr
        title = f"Loss is rising ({_rise_span(facts)}): {text}"
    if facts.get("recovered") is not None and facts.get("nan_step") is None and facts.get("kind") != "said":
        back = f"{facts['recovered_to']:.4g} by step {facts['recovered']}"
        evidence.append(f"then it came back: {back}, within a sixth of the {facts['best']:.4g} it rose from")
        return Advice("loss_diverging", INFO, f"Loss rose ({_rise_span(facts)}) at step {f.step} and came back "
                      f"({back}): nothing to change now; if it climbs again, {text}", evidence, {}, f.step)
    severity = WARNING
    if facts.get("nan_step") is not None:
        at = f" at step {facts['nan_step']}" if facts["nan_step"] else ""  # step 0: a paste's words, no step
        evidence.append(f"then {facts['nan_what']} became nan{at}: the rise ran away")
        severity = ERROR
    return Advice("loss_diverging", severity, title, evidence, change, f.step)


def _prefers_rejected_advice(f: Finding, r: Recipe | None) -> Advice:
    """A DPO loss above ln 2 for logs in a row (LossWatch._prefers_rejected): the policy prefers the rejected answers."""
    facts = f.facts
    (start_step, start), above = facts["start"], facts["above"]
    text, change = lr_move(r, facts.get("lr"))
    losses = ", ".join(f"{loss:.4g}" for _, loss, _ in above)
    evidence = [f"ln 2 = 0.693 is DPO's loss for a policy with no preference between chosen and rejected (it starts "
                f"there): it was {start:.4g} at step {start_step}; the {len(above)} logs from step {above[0][0]} sit "
                f"above it ({losses})"]
    margins = [margin for _, _, margin in above if margin is not None]
    if margins:
        evidence.append(f"rewards/margins {margins[0]:.3g} ... {margins[-1]:.3g}, negative in each: the rejected "
                        "answers score above the chosen ones")
    evidence.append("check first that chosen and rejected are not swapped in the data (the column names, a "
                    "preference label read backwards); else the updates overshoot: " + text)
    title = f"DPO loss above ln 2 ({start:.4g} -> {above[-1][1]:.4g} by step {f.step}): the policy now prefers the " \
        f"rejected answers -> {text}"
    return Advice("loss_diverging", WARNING, title, evidence, change, f.step)


def _rise_move(r: Recipe | None, lr_now: float | None) -> Move:
    """A lower learning rate, or a lower lora_alpha where alpha is over twice the rank (it scales every update)."""
    text, change = lr_move(r, lr_now)
    lora = r.lora if r is not None else None
    if lora is not None and not lora.use_rslora and lora.lora_alpha > 2 * lora.r:
        text = f"lower lora_alpha from {lora.lora_alpha:g} to {2 * lora.r} (alpha/r = {lora.lora_alpha / lora.r:g})"
        change = {"lora.lora_alpha": 2 * lora.r}
    return text, change


def _rise_span(facts: dict[str, Any]) -> str:
    """The rise in the logged values a person can find in their log (the fitted line's ends are in the evidence:
    a title that says `0.825 -> 2.73` above a log that reads 1.1 ... 3.1 looks like a misreading)."""
    logged = facts.get("logged")  # absent in a finding folded by an older version
    first, last = logged if logged else (facts["best"], facts["now"])
    return f"{first:.4g} -> {last:.4g}"


def _rise_shown(facts: dict[str, Any]) -> str:
    """What the logs show of a rising loss, by the kind of rise the loss watch found."""
    window = facts.get("window", 10)
    if facts.get("kind") == "creep":
        return (f"grad_norm spiked to {facts['grad']:.4g} at step {facts['best_step']}; the loss rose "
                f"in each of the {window} logs since, {facts['best']:.3g} -> {facts['now']:.3g}")
    if facts.get("kind") == "shift":
        p = facts["p"]
        chance = f"{p:.1%} of the time" if p >= 0.001 else "never"
        return (f"the {window} logs since step {facts['best_step']} sit at a median of {facts['now']:.4g} "
                f"against {facts['best']:.4g} over the {facts['before_n']} logs before: a third higher, "
                f"and the same logs shuffled show as large a change of level {chance}")
    if facts.get("kind") == "epoch_jump":
        return (f"the loss averaged over epoch {facts['epoch']:g} is {facts['now']:.4g} against "
                f"{facts['best']:.4g} over the epoch before: an epoch's average has no batch noise to "
                "double it, the weights broke (check the validation loss and accuracy beside it)")
    if facts.get("kind") == "climb":
        return (f"the loss fell from {facts['first']:.4g} to {facts['best']:.4g} at step "
                f"{facts['best_step']}, then rose in each of the {window} logs since, back past where it "
                f"started: a climb, not one noisy log")
    if facts.get("kind") == "step":
        return (f"every one of the {window} logs since step {facts['best_step']} (lowest "
                f"{facts['floor']:.4g}) is a third above every log before it (highest "
                f"{facts['ceiling']:.4g}): a new, higher level, not one noisy log")
    p = facts.get("p")
    beyond = "" if "p" not in facts else " and more than doubled" if p is None else \
        f"; the same logs shuffled rise as far {p:.1%} of the time" if p >= 0.001 else "; no shuffle rises as far"
    return (f"a trend over the {window} logs since step {facts['best_step']} (Theil-Sen line "
            f"{facts['best']:.3g} -> {facts['now']:.3g}; Mann-Kendall{beyond}: not noise)")
