"""The advice built from what the Advisor folded (core.py): each finding as advice with its moves, the OOM's with
what the text says of the card, the memory and the phase, a snapshot or a projection that only the whole text can
give, and a failure's own advice when nothing more specific was found. `rank.order` then sorts them. Pure logic."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from loratui import events
from loratui.logic import oom, oom_holders, oom_start, oom_tables, series
from loratui.logic.advisor import bnb_text, error_said, flash_raised, loss_words, rank
from loratui.logic.advisor.died import died_advice
from loratui.logic.advisor.advice import ERROR, GIB, Advice, Finding
from loratui.logic.advisor.failure import (
    cut_traceback_advice,
    ended_advice,
    exception_advice,
    scheduler_advice,
)
from loratui.logic.advisor.guard import guard_advice
from loratui.logic.advisor.hang import hung_advice
from loratui.logic.advisor.loss_advice import _diverging_advice, _flat_advice, _nan_advice, _zero_advice
from loratui.logic.advisor.moves import (
    _leak_advice,
    _rank_advice,
    _setup_advice,
    _starve_advice,
    _vram_advice,
)
from loratui.logic.advisor.nccl_advice import nccl_advice
from loratui.logic.advisor.oom_advice import _jump_advice, _oom_advice, host_phase_advice
from loratui.logic.advisor.oom_fold import MERGE
from loratui.logic.advisor.priced import memory_proposal
from loratui.logic.advisor.starve import text_starve_advice

if TYPE_CHECKING:
    from loratui.logic.advisor.core import Advisor

_LEVEL_GIVEN = re.compile(r"\d\.\d|\b(?:at|around|about|near|of|~)\s*\d|\d+\s*k?\s*(?:steps?|iter\w*|epochs?)\b",
                          re.I)
"""A number the person gives for their loss: its level (`stuck at 2.3`, `~0.9`) or how long it stood there (`for
3000 steps`); not a name's digit (`stage 1`)."""

_BUILDERS = {
    "oom_at_eval": _jump_advice, "oom_at_save": _jump_advice, "nan_loss": _nan_advice,
    "loss_flat": _flat_advice, "loss_zero": _zero_advice, "loss_diverging": _diverging_advice, "memory_leak": _leak_advice,
    "rank_imbalance": _rank_advice,
    "bnb_setup": _setup_advice, "flash_attn_unavailable": _setup_advice, "cuda_error": _setup_advice,
    "run_hung": hung_advice, "guard": guard_advice,
}
"""Each finding's builder, where it needs only the finding and the recipe."""

def build_all(adv: Advisor) -> list[Advice]:
    """Every finding of `adv` as advice (unsorted)."""
    logits = adv.estimate.components.get("logits", 0.0) if adv.estimate is not None else 0.0
    priced = memory_proposal(adv)
    built = _oom_built(adv, logits, priced) if adv.oom is not None and not _said_only(adv) else []
    built += _findings_built(adv, built)
    built += _whole_text_built(adv, built, logits, priced)
    if not any(a.severity == ERROR for a in built):
        built += failure(adv)
    return built


def _still_loss_excused(adv: Advisor, finding: Finding) -> bool:
    """A loss the person says stands still that is no report of a run that does not train: a diffusion model's loss is
    its noise prediction's error, led by the sampled timestep's noise, and looks flat while the model learns (judge
    by samples), as does any loss whose results the person says improve, or whose level they ask is normal with no
    number given (`stuck at 2.3 for 3000 steps, is it normal?` reports what a maintainer would ask for). A rise in
    words is no report where the person asks whether it is normal and puts it beside the learning rate's own rise
    (warm-up's end, a schedule that raises it): the maintainers' answer is that it is. An RL loss said to rise or
    stand still is no report either (core._RL: the reward is the measure), unless it names a value no objective
    reaches (a critic loss at 1e18) or says it blew up (`loss explosion` of an A2C value head, a SAC critic's
    `diverging loss`), or the gradient or the reward is said to stand still. A loss the log prints at a
    level still counts. getattr: an advisor pickled in an older events.idx."""
    if finding.id not in ("loss_flat", "loss_diverging") or finding.facts.get("kind") != "said":
        return False
    asked = getattr(adv, "asks_normal", False) and not _LEVEL_GIVEN.search(str(finding.facts.get("quote", "")))
    rl = getattr(adv, "rl", False) and not _no_gradient(finding)  # an RL loss in words: not a measure of progress
    if finding.id == "loss_diverging":  # a rise asked about beside the lr's own rise (warm-up, a schedule)
        quote = str(finding.facts.get("quote", ""))  # a critic loss at 1e18, or said to explode, diverged
        return (asked and getattr(adv, "lr_rises", False)) or \
            rl and not loss_words.names_huge(quote) and not loss_words.blew_up(quote)
    return getattr(adv, "diffusion", False) or getattr(adv, "results_good", False) or asked or rl


def _no_gradient(finding: Finding) -> bool:
    """A gradient (or the weights) said to be zero or unmoved, or the reward said to stay at 0 or never grow: no
    objective learns so, and the reward is an RL objective's own measure, so an RL loss is no excuse (ms-swift's GRPO
    `loss和grad_norm都为0`: every completion got the same reward, no advantage)."""
    quote = str(finding.facts.get("quote", ""))
    said = loss_words.read(quote)
    return said is not None and said.subject == "still" or loss_words.REWARD_STILL.search(quote) is not None


def _findings_built(adv: Advisor, built: list[Advice]) -> list[Advice]:
    """Each latched finding as advice, but those the ranking's rules or the run's nature set aside, and those of an
    id already `built`."""
    _said_rise_ran_away(adv)
    rose = adv.found.get("loss_diverging")
    ran_away = rose is not None and rose.facts.get("nan_step") is not None
    falling = series.falls_through([v for _, v in adv.loss.window])
    calm = _calm(adv)
    more: list[Advice] = []
    for finding in adv.found.values():
        if rank.words_yield(finding, falling, ran_away, calm):
            continue
        if _still_loss_excused(adv, finding):
            continue
        if finding.id == "nccl_timeout" and finding.facts.get("arrived") and adv.ctx.step > finding.step:
            continue  # the ranks waited at the store based barrier, then trained: every rank came
        if finding.id == "data_starved" and finding.facts.get("text") == "few_workers" and adv.text.workers_chosen:
            continue  # the program says its loader runs with 0 or 1 worker: the warning is by design
        if not any(a.id == finding.id for a in built + more):
            more.append(_build_one(adv, finding))
    return more


def _said_rise_ran_away(adv: Advisor) -> None:
    """A rise in words, then a NaN in the log: the NaN is where the rise ran to, as for a measured rise."""
    rose, nan = adv.found.get("loss_diverging"), adv.found.get("nan_loss")
    if rose is not None and rose.facts.get("kind") == "said" and nan is not None and \
            not rank.NAN_WORD.search(str(rose.facts.get("quote", ""))):
        rose.facts.setdefault("nan_step", nan.step)
        rose.facts.setdefault("nan_what", nan.facts.get("what", "loss"))


def _whole_text_built(adv: Advisor, built: list[Advice], logits: float, priced: Any) -> list[Advice]:
    """What no single finding holds: bitsandbytes' runtime, a snapshot's idle GPU, the VRAM line (measured or
    projected), a starved loader measured, the host's OOM placed by the person's words."""
    more: list[Advice] = []
    runtime = adv.text.bnb.finding() if "bnb_setup" not in adv.found else None
    if runtime is not None:
        more.append(bnb_text.runtime_advice(runtime))
    lone = adv.loss.lone_zero() if adv.pasted and "loss_zero" not in adv.found else None
    if lone is not None:
        more.append(_build_one(adv, lone))
    snapshot = adv.text.starve.at_end(adv.ctx.step) if "data_starved" not in adv.found else None
    if snapshot is not None:
        more.append(text_starve_advice(snapshot, adv.recipe))
    vram = adv.vram.current or _projected(adv)
    if vram is not None and adv.oom is None:
        more.append(_vram_advice(vram, adv.recipe, logits, priced, getattr(adv, "lengths", None)))
    if adv.starve.current is not None and not any(a.id == "data_starved" for a in built + more):
        more.append(_starve_advice(adv.starve.current, adv.recipe))
    host = getattr(adv, "host_oom", None)
    if adv.oom is None and host is not None and not host[1]:
        host = (host[0], *adv.text.where.phase(), host[3])  # the person's words about where, read after the death
    if adv.oom is None and host is not None and (host[1] in ("save", "eval") or adv.pasted and adv.end is None and
                                                  adv.trace.chosen is None and not adv.found and not built and
                                                  not more):
        # a host OOM in no phase, in a paste, is told only where nothing else is (an exception raised says it, with
        # where; a run's recorded end says how it was killed)
        more.append(host_phase_advice(host[1], host[0], host[2], host[3]))
    return more


def _calm(adv: Advisor) -> bool:
    """The text prints a loss series, finite to its last log (loss and grad norm), and the loss watch found nothing in
    it: a worried question beside it is no report (a NaN logged after the question would find its id taken by it)."""
    window, watch = adv.loss.window, adv.loss
    return len(window) >= rank.CALM_LOGS and window[-1][0] >= adv.ctx.step and not watch.bad_grad_streak and \
        not any(f.id in _LOSS_ALARMS and not rank.from_words(f) for f in adv.found.values())


def seen(adv: Advisor) -> rank.Seen:
    """What the ranking reads beside the findings (see `rank.order`)."""
    failed = rank.run_failed(adv.trace.chosen, adv.trace.count, adv.trace.cut,
                             adv.end is not None and adv.end.state == events.FAILED)
    oom_leads = adv.oom is not None and not _said_only(adv)  # an OOM only the person named yields
    return rank.Seen(step=adv.ctx.step, failed=bool(failed), raised=adv.trace.chosen, raised_count=adv.trace.count,
                     oom_leads=oom_leads)


def _said_only(adv: Advisor) -> bool:
    """Whether the OOM is only the person's word for one and yields (`rank.said_oom_yields`)."""
    assert adv.oom is not None
    report = adv.oom.facts["report"]
    if not report.said:
        return False
    found = set(adv.found)
    if any(phase in getattr(adv.text.where, "prose", {}) for phase in ("eval", "save")):
        found -= _TRAINING_CURVES  # an OOM said to strike in evaluation or a save: the training log beside it is context
    return bool(rank.said_oom_yields(report.text, found, adv.trace.chosen, _calm(adv)))

_LOSS_ALARMS = frozenset({"nan_loss", "loss_diverging", "loss_zero", "loss_flat"})

_TRAINING_CURVES = frozenset({"loss_flat", "loss_zero", "loss_diverging", "data_starved", "vram_near_limit",
                              "nccl_timeout"})
"""What a training log's curves show, and the timeouts the other ranks report when one of them dies: beside an OOM
the person places in evaluation or a save, the log they pasted is context, not the complaint."""


def _oom_built(adv: Advisor, logits: float, priced: Any = None) -> list[Advice]:
    assert adv.oom is not None
    phase, evidence = adv.oom_phase()
    facts = dict(adv.oom.facts, phase=phase, lengths=getattr(adv, "lengths", None))  # getattr: an older index
    card = None if facts["others"] else oom_tables.smi_card(getattr(adv.text.where, "smi", []), facts["report"])
    if card is not None:  # no telemetry (a pasted log): the processes an nvidia-smi table in it lists
        facts["others"] = oom_tables.smi_others(card[1], facts["report"])
        evidence = evidence + [f"nvidia-smi lists {len(card[1])} processes on GPU {card[0]}: " +
                               ", ".join(f"PID {pid} ({oom.gib(size)})" for pid, size in card[1][:6])]
    if phase == "save" and not facts.get("merge"):
        facts["merge"] = any(MERGE.search(line) for line in evidence)
    total, free = getattr(adv, "card_at_start", (None, None))
    if facts["report"].kind == oom.UNKNOWN and total and free is not None and oom.held_before(total, free):
        facts["report"] = replace(facts["report"], kind=oom.OTHER_PROCESS,
                                  note=f"only {oom.gib(free)} of {oom.gib(total)} was free before this program "
                                       "allocated anything", held=True)
    pool = getattr(adv, "tf_pool", None)  # getattr: an advisor pickled in an older events.idx
    if facts["report"].kind == oom.UNKNOWN and pool and oom_start.pool_refused(facts["report"].text, pool):
        facts["report"] = replace(facts["report"], kind=oom.OTHER_PROCESS, note=oom_start.pool_note(pool), held=True)
    cause = getattr(adv.text.where, "cause", None)  # getattr: an advisor pickled in an older events.idx
    if cause is not None and (facts["report"].kind == oom.UNKNOWN or oom.words_settle(facts["report"], cause[0])):
        # no numbers, or numbers that leave room for a neighbour the words name: the user's words say what held it
        facts["report"] = replace(facts["report"], kind=cause[0])
        evidence = evidence + ["as the text says: " + cause[1]]
        if cause[0] == oom.OTHER_PROCESS and oom_holders.names_first_card(cause[1]):
            evidence.append("if what holds GPU 0 is this job's own other processes (ranks, workers): call "
                            "torch.cuda.set_device(local_rank) before each one's first CUDA call, so none opens a "
                            "context on GPU 0")
    facts["batch_one"] = getattr(adv.text, "batch_one", "")  # getattr: an advisor pickled in an older events.idx
    built = _oom_advice(Finding("oom", adv.oom.step, facts), adv.recipe, adv.long_sample(), logits, priced)
    if evidence:
        built = [_with_evidence(a, evidence) if a.id.startswith("oom_at_") or cause is not None or card is not None
                 else a for a in built]
    return built


def _with_evidence(advice: Advice, extra: list[str]) -> Advice:
    """The advice with more evidence lines."""
    return replace(advice, evidence=advice.evidence + extra)


def _build_one(adv: Advisor, finding: Finding) -> Advice:
    if finding.id == "nccl_timeout":
        return nccl_advice(finding, adv.recipe, len(adv.text.nccl_ranks), adv.text.nccl_lines,
                           (adv.text.prep_line, adv.text.prep_s))
    if finding.id == "data_starved":
        return text_starve_advice(finding, adv.recipe)
    if finding.id == "bnb_setup" and getattr(adv.text, "mac_line", ""):  # getattr: an older pickled advisor
        finding = Finding(finding.id, finding.step, dict(finding.facts, mac=adv.text.mac_line))
    if finding.id == "nan_loss" and adv.text.scale_line:  # the text shows fp16's loss scaler at work
        finding = Finding(finding.id, finding.step, dict(finding.facts, fp16_scale=adv.text.scale_line))
    return _BUILDERS[finding.id](finding, adv.recipe)


def failure(adv: Advisor) -> list[Advice]:
    """A failed run with nothing more specific: its exception, a cut-off traceback, or how it ended.
    A live run's printed exception that did not end it is not a failure."""
    if adv.end is None and not adv.pasted:
        return []
    raised = adv.trace.chosen
    step = adv.ctx.step
    if adv.end is not None and adv.end.cause:  # the scheduler's word first: its kill's traceback is a symptom
        return [scheduler_advice(adv.end)]
    if raised is not None and bnb_text.raised_in_setup(raised):
        return [bnb_text.raised_advice(raised, step)]
    if raised is not None and flash_raised.raised_in_flash(raised):
        facts = {"line": raised.line, "build": flash_raised.raised_in_build(raised)}
        return [_BUILDERS["flash_attn_unavailable"](Finding("flash_attn_unavailable", step, facts), adv.recipe)]
    if raised is not None:
        # getattr: a text watch pickled in an older events.idx
        return [exception_advice(raised, adv.recipe, step, getattr(adv.text, "checkpointing_line", ""))]
    if adv.trace.cut:
        return [cut_traceback_advice(tuple(adv.trace.frames), adv.trace.phase, step)]
    said = getattr(adv.text, "error_said", None)  # getattr: a text watch pickled in an older events.idx
    if said is not None and adv.pasted:
        return [error_said.said_advice(*said, step)]
    if adv.text.died is not None and adv.pasted:  # a line the OS, a shell or a launcher printed as it ended a process
        return [died_advice(*adv.text.died, step)]
    if adv.end is not None:
        return [ended_advice(adv.end, list(adv.tail), "command" if adv.spoken is not None else "trainer")]
    return []


def _projected(adv: Advisor) -> Finding | None:
    """The pre-flight estimate over the line, until measured training windows exist."""
    estimate, line = adv.estimate, adv.vram.line  # the run's line (recipe, else its header)
    if estimate is None or adv.no_gpu or adv.vram.seen_training or not 0 < estimate.peak_device_gib < 4096:
        return None
    peak = int(estimate.peak_device_gib * GIB)
    return Finding("vram_near_limit", 0, {"projected": True, "peak": peak, "line": line}) if peak >= line else None
