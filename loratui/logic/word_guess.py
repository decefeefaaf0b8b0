"""The word model's guess: which kind of report a text reads like, where no rule found anything in it (or where the
rules' answer is a catch-all: `refined_kind`; or an OOM whose holder they could not settle: `memory_kind`).

Pure: the model's arrays come in (loratui/sources/word_model.py loads them), a guess or None goes out. The model is
bench/train_word_model.py's: TF-IDF of word 1-2-grams and character 3-5-grams (scikit-learn's analyzers, rebuilt
here so the package needs no scikit-learn), a logistic regression that says whether a problem is described at all,
and a 15-way one that says which kind. Measured on text no rule and no model saw (docs/learned_fallback.md): where
the rules say nothing, speaking only when P(problem) >= 0.9 gains more records than it loses healthy ones.
A guess is never evidence: the advice says it is one, and names what to check first.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from loratui.logic.advisor.advice import WARNING, Advice
from loratui.logic.categories import ADVICE_ID
from loratui.logic.clauses import CJK, cjk_spaced

SPEAK_AT = 0.9
"""P(a problem is described) at or above which the guess is given; fixed before it was measured on held-out text."""
KIND_AT = 0.3
"""The kind's share among the problem kinds at or above which it is named. Below it the model knows a problem is
described but not which, and a named kind would mislead (a checkpoint crash read as 'a loss that climbs' at 20 %): no
guess. 0.5 at first (more likely than all the others together); 0.3 since out-of-fold on 1,006 dev excerpts it named
6 more right kinds for 1 more healthy text called sick (bench/guess_gate.py prints the curve)."""
MAX_CHARS = 16_000
"""Longer texts get no guess: the model learned from pasted excerpts (the longest about 7,000 characters); a whole
training log where no rule fired is most likely a healthy one, out of what it learned."""
_WORD = re.compile(r"(?u)\b[a-zA-Z_][a-zA-Z_]+\b")
_SPACES = re.compile(r"\s\s+")
_CJK_CHAR = re.compile(f"[{CJK}]")


def prepared(text: str) -> str:
    """The text both analyzers read (bench/train_word_model.py's `preprocessor`): lower case, and a space where a
    Chinese character touches a Latin letter or digit. Chinese writers put one there or not (`训练时 loss 不降` /
    `训练时loss不降`); without it the word analyzer's `\b` never finds `loss` (时 and l are both word characters)
    and the character n-grams of each word differ."""
    return cjk_spaced(text).lower()


@dataclass(frozen=True)
class WordModel:
    """The arrays of a trained model (see bench/train_word_model.py for their meaning)."""

    word_index: dict[str, int]
    word_idf: Any
    char_index: dict[str, int]
    char_idf: Any
    sick_coef: Any
    sick_intercept: float
    kind_coef: Any
    kind_intercept: Any
    kinds: tuple[str, ...]
    records: int


@dataclass(frozen=True)
class Guess:
    kind: str
    """The corpus category the text reads like."""
    p_problem: float
    p_kind: float
    """The kind's share among the problem kinds (healthy left out)."""


def word_grams(text: str) -> list[str]:
    """scikit-learn's word analyzer: the prepared text, the token pattern, then 1- and 2-grams."""
    tokens = _WORD.findall(prepared(text))
    return tokens + [f"{a} {b}" for a, b in itertools.pairwise(tokens)]


def char_grams(text: str) -> list[str]:
    """scikit-learn's `char_wb` analyzer for n of 3 to 5: n-grams inside each word padded with a space."""
    grams = []
    for word in _SPACES.sub(" ", prepared(text)).split():
        padded = f" {word} "
        for n in range(3, 6):
            grams += [padded[i:i + n] for i in range(max(len(padded) - n + 1, 1))]
            if len(padded) <= n:  # a short word counts once, as scikit-learn counts it
                break
    return grams


def _tfidf(grams: list[str], index: dict[str, int], idf: Any, offset: int) -> dict[int, float]:
    """Sublinear TF times IDF, L2-normalised, as column -> value (columns shifted by `offset`)."""
    counts = Counter(index[g] for g in grams if g in index)
    values = {column: (1.0 + math.log(n)) * float(idf[column]) for column, n in counts.items()}
    norm = math.sqrt(sum(v * v for v in values.values())) or 1.0
    return {column + offset: v / norm for column, v in values.items()}


def features(model: WordModel, text: str) -> dict[int, float]:
    """The text's feature vector, sparse: the word block, then the character block."""
    found = _tfidf(word_grams(text), model.word_index, model.word_idf, 0)
    found.update(_tfidf(char_grams(text), model.char_index, model.char_idf, len(model.word_index)))
    return found


def probabilities(model: WordModel, text: str) -> tuple[float, list[float]]:
    """P(a problem is described) and the 15-way probabilities in `model.kinds` order."""
    import numpy as np

    x = features(model, text)
    columns = np.fromiter(x.keys(), dtype=np.int64, count=len(x))
    values = np.fromiter(x.values(), dtype=np.float64, count=len(x))
    z = float(model.sick_intercept) + float(model.sick_coef[columns].astype(np.float64) @ values)
    p_sick = 1.0 / (1.0 + math.exp(-z))
    scores = model.kind_intercept.astype(np.float64) + model.kind_coef[:, columns].astype(np.float64) @ values
    exps = np.exp(scores - scores.max())
    return p_sick, [float(e) for e in exps / exps.sum()]


_TABLE_LINE = re.compile(r"^\s*(?:[|+=]|\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4}\s*$)")
"""A line of a drawn table (nvidia-smi's `|`, `+---`, `===`) or nvidia-smi's date line above it."""
MIN_WORDS = 3
"""Words outside drawn tables below which there is no report to read."""


def has_words(text: str) -> bool:
    """Whether the text says anything outside a drawn table. A bare nvidia-smi paste holds the same words whether
    the card is healthy or held by a stray process (most reports of another process paste one), so the model
    reads it as a problem it cannot know of (trial 7: a healthy A100 at 97 %, one python process, read as another
    process holding the memory, p=0.99). Words are counted in the prepared text (`一直hang住` holds `hang`), and
    Chinese counts a word to every two characters (no spaces mark its words)."""
    kept = " ".join(line for line in text.splitlines() if not _TABLE_LINE.match(line))
    return len(_WORD.findall(prepared(kept))) + len(_CJK_CHAR.findall(kept)) // 2 >= MIN_WORDS


@dataclass(frozen=True)
class Reading:
    """The model's reading of a text: P(a problem is described) and each kind's probability by name."""

    p_problem: float
    kinds: dict[str, float]


def read(model: WordModel, text: str) -> Reading | None:
    """The model's reading of `text`; None for a text it does not read (longer than MAX_CHARS, or no words outside
    drawn tables)."""
    if len(text) > MAX_CHARS or not has_words(text):
        return None
    p_sick, p_kinds = probabilities(model, text)
    return Reading(p_problem=p_sick, kinds=dict(zip(model.kinds, p_kinds)))


def _picked(reading: Reading | None, *picks: Any) -> tuple[Guess, int] | None:
    """The first of `picks` (each: P(problem) and the kinds' probabilities by name -> (kind, share) or None) that
    picks a kind on the reading, and its place among them; None where there is no reading or none picks."""
    for place, pick in enumerate(picks if reading is not None else ()):
        picked = pick(reading.p_problem, reading.kinds)
        if picked is not None:
            return Guess(kind=picked[0], p_problem=reading.p_problem, p_kind=picked[1]), place
    return None


def _guessed(model: WordModel, text: str, pick: Any) -> Guess | None:
    found = _picked(read(model, text), pick)
    return found[0] if found is not None else None


def guess(model: WordModel, text: str) -> Guess | None:
    """The kind of report `text` reads like, when the model is confident a problem is described; else None."""
    return _guessed(model, text, kind_pick)


def kind_pick(p_sick: float, kinds: dict[str, float], speak: float = SPEAK_AT,
              kind_at: float = KIND_AT) -> tuple[str, float] | None:
    """`guess`'s gate on the model's probabilities: (kind, its share of the problem kinds), or None (`speak`,
    `kind_at`: the thresholds; bench/guess_gate.py prints others)."""
    if p_sick < speak:
        return None
    sick = [(p, kind) for kind, p in kinds.items() if kind != "healthy"]
    p, kind = max(sick)
    share = p / sum(q for q, _ in sick)
    return (kind, share) if share >= kind_at else None


MEMORY_KINDS = ("oom_full", "oom_other_process", "oom_fragmentation")
"""What can hold a card's memory when a program runs out of it: itself, another process, or its own pool's holes."""
MEMORY_AT = 0.5
"""The share among MEMORY_KINDS at or above which the words name what held the memory (when it is also the kind the
words read most like of all). Out of fold on the dev split (bench/guess_gate.py), on the 38 OOMs whose message
settled nothing: 17 right as "full", 25 with this gate, which changed 16 of the 38."""


def memory_kind(model: WordModel, text: str) -> Guess | None:
    """What held the memory, in the words of a report whose OOM message does not say: another process or
    fragmentation when the model reads one at MEMORY_AT of the memory kinds; None for "full" (the rules' own
    default) or no clear reading."""
    return _guessed(model, text, _memory)


def memory_pick(kinds: dict[str, float], at: float = MEMORY_AT) -> tuple[str, float] | None:
    """`memory_kind`'s gate on the kinds' probabilities: (kind, its share of the memory kinds), or None (`at`: the
    share needed; bench/guess_gate.py prints others)."""
    sick = {kind: p for kind, p in kinds.items() if kind != "healthy"}
    shares = {kind: sick[kind] for kind in MEMORY_KINDS}
    kind = max(shares, key=shares.__getitem__)
    share = shares[kind] / sum(shares.values())
    # and the words read most like it of all kinds: among the memory kinds alone, a text the model reads as a CUDA
    # error (a plain `CUDA error: out of memory` traceback, 1 % on each memory kind) would be named by noise
    top = max(sick, key=sick.__getitem__) == kind
    return (kind, share) if kind != "oom_full" and share >= at and top else None


REFINE_AT = 0.7
"""The share of the problem kinds at or above which the words name a more specific kind than the rules' catch-all
answer (REFINES). Chosen wave by wave on text neither the rules nor the model had read (bench/refine_gate.py): 0.7 on
every wave, 19 more right of 2,080 (1322 -> 1341) and 23 of 2,443 (1566 -> 1589), oom_full 1 fewer either way."""
OOM_PHASES = ("oom_at_eval", "oom_at_save")
REFINES = {
    "exception": ("flash_attn_unavailable", "bnb_setup", "cuda_error", "nccl_timeout", "oom_full",
                  "oom_fragmentation", "oom_other_process", *OOM_PHASES),
    "oom_full": OOM_PHASES,
}
"""The rules' answers that are a catch-all, by advice id, and the kinds the words may name instead: an exception whose
kind no rule knows (a traceback cut before its exception line, an error a build prints), and an OOM with no frame or
banner that says when it ran out (training is the default). What held the memory is `memory_kind`'s."""


def refined_kind(model: WordModel, text: str, answer: str) -> Guess | None:
    """A more specific kind than the rules' catch-all `answer` (an advice id of REFINES), when the words read as one of
    its kinds above all others at REFINE_AT of the problem kinds; else None."""
    return _guessed(model, text, _refining(answer)) if answer in REFINES else None


def refine_pick(kinds: dict[str, float], allowed: tuple[str, ...], at: float = REFINE_AT) -> tuple[str, float] | None:
    """`refined_kind`'s gate: (kind, its share of the problem kinds) when the kind the words read most like of all
    problems is one of `allowed` and its share is at least `at` (kind_pick's share, whatever P(problem)); else None."""
    picked = kind_pick(1.0, kinds, speak=0.0, kind_at=at)
    return picked if picked is not None and picked[0] in allowed else None


def _memory(p_sick: float, kinds: dict[str, float]) -> tuple[str, float] | None:
    return memory_pick(kinds)


def _refining(answer: str) -> Any:
    return lambda p_sick, kinds: refine_pick(kinds, REFINES[answer])


def first_guess(reading: Reading | None, catch_all: str | None = None, memory: bool = False,
                plain: bool = False) -> tuple[Guess, str] | None:
    """The one guess `doctor` puts first and what it answers (advice's `answers`), on one reading of the text: a kind
    more specific than the rules' catch-all answer `catch_all` (an advice id of REFINES, or None: `refined_kind`);
    else, for an OOM whose kind nothing read settled (`memory`), what held the memory (`memory_kind`); else, where no
    rule found a problem (`plain`), the kind of report the text reads like (`guess`). None when none of them speaks."""
    asked = ([(_refining(catch_all), catch_all)] if catch_all in REFINES else []) + (
        [(_memory, MEMORY)] if memory else [(kind_pick, PLAIN)] if plain else [])
    found = _picked(reading, *(pick for pick, _ in asked))
    return (found[0], asked[found[1]][1]) if found is not None else None


_SAYS = {
    "oom_other_process": ("another process holding the GPU's memory",
                          ("nvidia-smi before the run starts: memory in use then is another process's; stop it or "
                          "pick a free card (CUDA_VISIBLE_DEVICES)")),
    "oom_full": ("a GPU running out of memory",
                 ("lower the batch size (per_device_train_batch_size; raise gradient_accumulation_steps to keep "
                 "the effective batch), the sequence length, or turn on gradient checkpointing")),
    "oom_fragmentation": ("memory fragmentation",
                          ("the OOM message's reserved against allocated memory: far more reserved means "
                          "fragmentation; set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")),
    "oom_at_eval": ("running out of memory during evaluation",
                    ("lower the evaluation's batch size (per_device_eval_batch_size); under the Trainer, set "
                    "eval_accumulation_steps and keep what compute_metrics receives small "
                    "(preprocess_logits_for_metrics)")),
    "oom_at_save": ("running out of memory while saving or merging",
                    "save the adapter alone; merge in a separate process, on the CPU or in 16-bit"),
    "nan_loss": ("a loss that turns NaN or Inf", "a lower learning rate, bf16 instead of fp16, max_grad_norm 1.0"),
    "loss_diverging": ("a loss that climbs", "a lower learning rate with warm-up; the scheduler's state after a resume"),
    "loss_flat_or_zero": ("a loss that does not move, or sits at 0",
                          ("the learning rate is not 0, the labels are not all masked (-100), and the trainable "
                          "parameters are the ones meant")),
    "data_starved": ("a run held back by its data",
                     "the data time against the step time; more dataloader_num_workers; tokenise once and cache it"),
    "bnb_setup": ("a bitsandbytes build that does not fit the machine",
                  "`python -m bitsandbytes` says what it found; install the build for this CUDA or ROCm"),
    "cuda_error": ("a CUDA error", ("rerun with CUDA_LAUNCH_BLOCKING=1 to see the failing call; token ids against "
                   "the embedding size")),
    "nccl_timeout": ("a distributed run timing out",
                     "rerun with NCCL_DEBUG=INFO; a longer ddp_timeout when one rank prepares data alone"),
    "flash_attn_unavailable": ("flash-attention that cannot be used",
                               "the flash_attn wheel against torch and CUDA, or attn_implementation='sdpa'"),
    "exception_other": ("an error in the script or its libraries",
                        "the last exception's line and the versions of the libraries it names"),
}


GUESS_TITLE = "Its words read like a report of"
"""How the title of every guess begins (the word model's and the arbiter's alike)."""


def guessed_advice(kind: str, why: str, read: str) -> Advice:
    """A guess of `kind` as a warning that says it is one (`why`: why the rules did not answer it), what read it
    (`read`), and what to check first: the word model's guess and the arbiter's answer alike."""
    what, check = _SAYS.get(kind, (kind.replace("_", " "), "the last error's line"))
    return Advice(id=ADVICE_ID.get(kind, kind), severity=WARNING,
                  title=f"{GUESS_TITLE} {what} (a guess: {why})",
                  evidence=[read, f"check first: {check}"], change={}, step=0)


PLAIN, MEMORY = "plain", "memory"
"""What a guess answers: no rule found a problem (`guess`), or what held an OOM's memory (`memory_kind`); a guess that
refines a catch-all answer (`refined_kind`) is told by that answer's advice id, a key of REFINES."""
_WHY = {
    PLAIN: "no log line or number here shows it",
    MEMORY: "the OOM message does not say what held the memory",
    "exception": "the error's own lines do not say what it is about",
    "oom_full": "no line here says when the memory ran out",
}


def advice(found: Guess, records: int, answers: str = PLAIN) -> Advice:
    """The guess as a warning that says it is one: what the text reads like, how sure, and what to check first
    (`answers`: PLAIN, MEMORY, or the advice id of the catch-all answer it refines)."""
    if answers == MEMORY:
        read = f"of the out-of-memory kinds, this reads most like {found.kind} ({found.p_kind:.0%})"
    elif answers in REFINES:
        read = f"of the problem kinds it knows, this reads most like {found.kind} ({found.p_kind:.0%})"
    else:
        read = (f"a problem is described (p={found.p_problem:.2f}); of the kinds it knows, this reads most like "
                f"{found.kind} ({found.p_kind:.0%})")
    return guessed_advice(found.kind, _WHY[answers], f"a word model trained on {records} real reports: {read}")
