"""What the advisor says: the fixed vocabulary of ids, `Advice`, and the detectors' `Finding`."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from loratui.logic.fmt import QUOTE_WIDTH
from loratui.recipe import MonitorSection, Recipe
from loratui.units import GIB, MIB  # noqa: F401  (re-exported)

ERROR, WARNING, INFO = "error", "warning", "info"
IDS = (
    "scheduler_end", "oom_at_eval", "oom_at_save", "oom_full", "oom_fragmentation", "oom_other_process", "cuda_error",
    "nccl_error", "run_hung", "guard",
    "nccl_timeout", "bnb_setup", "flash_attn_unavailable", "nan_loss", "loss_diverging", "exception",
    "vram_near_limit", "memory_leak", "rank_imbalance", "loss_zero", "loss_flat", "data_starved",
)
"""The fixed vocabulary of advice ids, in the order of importance within one severity. `nccl_error`: NCCL's own failure
that is no timeout (`unhandled system error`, two ranks on one GPU), read from the same lines as a CUDA error."""
FOUND_AS = {"nccl_error": "cuda_error"}
"""Advice ids built from a finding of another id: NCCL's own failure is read where CUDA's errors are (the ranking
finds an item's finding by it)."""
WORKERS_MAX = 16


def more_workers(now: int) -> int | None:
    """The loader's next worker count, the one rule of every data_starved move: 4 from none, else twice as many, up
    to WORKERS_MAX; None from WORKERS_MAX on."""
    return None if now >= WORKERS_MAX else 4 if now == 0 else min(WORKERS_MAX, 2 * now)


def more_workers_change(r: Recipe | None) -> dict[str, object]:
    """The recipe change that raises the loader's workers (`more_workers`); none without a recipe or past the most."""
    new = more_workers(r.training.dataloader_num_workers) if r is not None else None
    return {"training.dataloader_num_workers": new} if new is not None else {}


_SEVERITY_RANK = {ERROR: 0, WARNING: 1, INFO: 2}


@dataclass(frozen=True)
class Advice:
    """One piece of advice: what is wrong, the numbers that show it, and the recipe change that helps."""

    id: str
    severity: str
    title: str
    evidence: list[str]
    change: dict[str, Any]
    """Dotted recipe key (or `env.NAME`) -> new value; empty when no recipe key fixes it."""
    step: int
    """The optimiser step at which it was detected (the last completed step)."""
    fix: dict[str, Any] = field(default_factory=dict)
    """What `A` writes: the recipe keys of `change` for a recipe run, the config's own YAML keys for a
    watched LLaMA-Factory/axolotl command; empty where `A` does not apply."""
    no_fix: str = ""
    """Why `A` is not offered for this advice although it has a change (one line), or ''."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape `loratui doctor --json` prints (what `A` would write is the viewer's business)."""
        out = asdict(self)
        del out["fix"], out["no_fix"]
        return out


KEPT_AS_WRITTEN = ("bitsandbytes", "flash-attention", "pip", "xformers", "torch", "nvidia-smi")
"""Names written lower-case by their makers: a title that starts with one keeps it so (`bitsandbytes cannot use
the GPU`)."""
_FIRST_WORD = re.compile(r"[^\s:;,()']+")
_PLAIN_WORD = re.compile(r"[a-z]+(?:-[a-z]+)*")


def sentence_case(title: str) -> str:
    """The title in sentence case, the style of every item's title: its first letter upper-case (`loss became nan` ->
    `Loss became nan`, `guard verdict: ...` -> `Guard verdict: ...`), unless its first word is a name or key written
    as it is (`bitsandbytes`, `xFormers'`, `grad_norm`, `fp16`, `train/loss`: an inner capital, a digit, `_`, `/` or
    `.`, or KEPT_AS_WRITTEN)."""
    first = _FIRST_WORD.match(title)
    word = first.group(0) if first else ""
    if not _PLAIN_WORD.fullmatch(word) or word in KEPT_AS_WRITTEN:
        return title
    return title[:1].upper() + title[1:]


_QUOTE_LABEL = re.compile(r"^(?:[^:]{0,60}?as the text says|the last NCCL line|the last status before it): ")


def distinct_evidence(evidence: list[str]) -> list[str]:
    """The evidence with each quoted line once: a later line that quotes again what an earlier one showed (the same
    line under "as the text says:", or one of the two cut short, with or without its '…') is left out. Two detectors
    that each quote the line they read gave a paste the same sentence two or three times in one item."""
    kept: list[str] = []
    bodies: list[tuple[str, bool]] = []  # each kept line's quoted text, and whether it may be cut short
    for line in evidence:
        body = _QUOTE_LABEL.sub("", line)
        cut = body.endswith("…") or len(body) >= QUOTE_WIDTH  # the detectors keep this much of a line (fmt.quoted)
        body = body.rstrip("…").rstrip()
        if any(body == seen or (len(body) >= 40 and len(seen) >= 40 and (
                (seen_cut and body.startswith(seen)) or (cut and seen.startswith(body))))
               for seen, seen_cut in bodies):
            continue
        kept.append(line)
        bodies.append((body, cut))
    return kept


_STEP_SAID = re.compile(r"\bstep (\d{1,9})\b", re.I)


def named_step(advice: Advice) -> int | None:
    """The step a pasted text's advice is about: its own, else the first `step N` its title or evidence says (a
    paste's `CUDA out of memory at step 1200 when saving`), else None. Read on a paste, step 0 is no step (the
    CLI shows none); in a recorded run it is the start, and the item's own step is used there as it is."""
    if advice.step:
        return advice.step
    for line in (advice.title, *advice.evidence):
        said = _STEP_SAID.search(line)
        if said:
            return int(said.group(1))
    return None


@dataclass(frozen=True)
class Finding:
    """What a detector saw: its id, the step, and the facts the advice is built from."""

    id: str
    step: int
    facts: dict[str, Any]


def line_for(warn: int, total: int) -> int:
    """The line memory is judged against, by the advisor and the VRAM pane alike: the warning line, or 95%
    of a card smaller than it."""
    return min(warn, int(total * 0.95)) if total > 0 else warn


def over_line(used: int, warn: int, total: int) -> bool:
    """Whether `used` bytes are over the run's line (see `line_for`)."""
    return used >= line_for(warn, total)


def warn_line_bytes(recipe: Recipe | None) -> int:
    """The VRAM warning line in bytes (`warn_gb` read as GiB)."""
    monitor = recipe.monitor if recipe is not None else MonitorSection()
    return int(monitor.warn_gb * GIB)

