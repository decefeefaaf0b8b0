"""Which finding leads: the one rule that orders the advisor's items, as a maintainer ranks evidence.

A maintainer reading a pasted log names first what is most DIRECT: what stopped the run over what happened on the
way, a number the program measured over the person's words, the person's stated symptom over an incidental line.
The ladder, from the top (each rung says why it outranks the next):

1. `stopped`: what ended the run. The scheduler's kill, the traceback's own error (an OOM with its account, a
   CUDA fault, a setup error raised; the first exception, unless it only wraps another process's failure; one Python
   says it ignored or the program retries is none), the earliest root cause on any rank before the timeouts and
   peer failures it caused (`root.first_root`). It is what the person must fix before anything else can be seen.
2. `measured`: numbers the program printed: a loss series (NaN, a rise, flat or zero), memory samples, rates. They
   say what happened whatever anyone believes happened.
3. `said`: the person's own words about a symptom (`the loss is nan`, `I get OOM`, `loss stuck at 2.3`): the
   complaint itself when the text prints no numbers, but their words may tell the run's history (`I got OOM,
   lowered the batch, now ...`) or only a worry, so they yield to rungs 1 and 2 (`words_yield`).
4. `incidental`: warnings the run went on past (flash-attention missing, bitsandbytes without GPU, then training
   logged steps), a KeyboardInterrupt (someone stopped it: no failure), torch's SDPA build note: notes after every
   finding, a GPU that waits for data included (`root.went_on`, `root.interrupted`); a note never leads as a root.

Within a rung the order is severity (error, warning, info), then the fixed vocabulary's order (`IDS`: the more
specific cause first), then the step. `order` applies the ladder to built advice; `words_yield` decides whether
a finding from the person's words is dropped because stronger evidence in the same text contradicts or outranks
it. Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from loratui.logic import oom, oom_words
from loratui.logic.advisor import root, said
from loratui.logic.advisor.advice import _SEVERITY_RANK, FOUND_AS, IDS, INFO, Advice, Finding
from loratui.logic.clauses import sentences
from loratui.logic.tracebacks import Raised

TIERS = (
    ("stopped", ("what ended the run: the scheduler's kill, the traceback's own error, the first root cause "
                 "before its consequences")),
    ("measured", "numbers the program printed: a loss series, memory samples, rates"),
    ("said", "the person's words about a symptom: the complaint when no numbers show it"),
    ("incidental", "warnings the run went on past and a run stopped by hand: notes"),
)
"""The ladder `order` applies, with the reason each rung outranks the next (see the module's docstring)."""


@dataclass(frozen=True)
class Seen:
    """What the whole text showed beside the findings: the inputs of the ladder."""

    step: int
    """The last step seen (a setup warning the run trained past by some steps is a note)."""
    failed: bool
    """A traceback, a cut traceback or a failed end: the run stopped."""
    raised: Raised | None
    """The exception the traceback reader chose as the run's (`TraceScanner.chosen`)."""
    raised_count: int
    """Exceptions seen in all (a setup finding counts those raised before it)."""
    oom_leads: bool
    """An OOM the program printed (not only the person's word for one): it leads by severity and id already."""


def run_failed(raised: Raised | None, raised_count: int, cut: bool, ended_failed: bool) -> bool:
    """Whether the run stopped on a failure: a traceback (not only someone's Ctrl-C: a KeyboardInterrupt alone is
    rung 4), a traceback cut before its exception, or an end recorded as failed."""
    by_hand = raised is not None and raised.short_type == "KeyboardInterrupt" and raised_count == 1
    return raised_count > 0 and not by_hand or cut or ended_failed


def key(advice: Advice) -> tuple[int, int, int]:
    """Within a rung: severity, then the vocabulary's order (the more specific cause first), then the step."""
    return _SEVERITY_RANK[advice.severity], IDS.index(advice.id), advice.step


def order(built: list[Advice], found: dict[str, Finding], seen: Seen,
          failure: Callable[[], list[Advice]]) -> list[Advice]:
    """The advice most direct first (the ladder above). `failure` builds the run's exception item, asked for only
    when the ladder puts an exception first that was not built (a specific error hid it)."""
    noted = [root.went_on(a, found.get(FOUND_AS.get(a.id, a.id)), seen.step, seen.failed)  # rung 4: went on past it
             for a in built]
    went_past = {a.id for a, was in zip(noted, built) if a is not was}
    # a note that nothing failed there comes after every finding of its severity (a GPU that waits for data)
    built = sorted(noted, key=lambda a: (_SEVERITY_RANK[a.severity], a.id in went_past, *key(a)[1:]))
    built = root.interrupted(built, seen.raised)  # rung 4: someone stopped it by hand
    lead = root.first_root(found, seen.raised, seen.raised_count) if not seen.oom_leads else ""  # rung 1
    if any(FOUND_AS.get(a.id, a.id) == lead and a.severity == INFO for a in built):
        lead = ""  # a note (torch's SDPA build, a warning trained past) is no root cause to lead with
    if lead == "exception" and not any(a.id == "exception" for a in built):
        built += [a for a in failure() if a.id == "exception"]
    return root.lead_with(built, lead, found) if lead else built


# -- rung 3: when the person's words yield ------------------------------------------------------------------------

CALM_LOGS = 5
"""Printed losses enough to call a log calm (all finite) beside a worried question."""
_MODAL = re.compile(r"\b(?:would|will|could|might|may|shall|going to)\b|会不会|可能会|是否会", re.IGNORECASE)
"""A question about what might happen (`why would the loss become nan?`): a worry when the log beside it is calm."""
_CONDITION = re.compile(r"\bwhat if\b|\b(?:would|will|could|might)\b[^?]{0,80}?\b(?:if|once|when)\b|"
                        r"\b(?:if|once|when)\b[^?]{0,80}?\b(?:would|will|could|might)\b|如果[^？?]{0,40}?会", re.IGNORECASE)
"""A question about what would happen under a condition (`will this run out of memory if I double the length?`,
`what if the loss goes nan?`): a worry whatever the log beside it shows."""
_WHY_MODAL = re.compile(r"\b(?:why|how come)\s+(?:\w+\s+){0,3}?(?:would|will|could|might|may)\b|为什么会", re.IGNORECASE)
"""`why would my loss become nan after 300 steps?`: a question about what was seen, in a modal's words."""
_NOT_YET = re.compile(r"\bso far\b|\b(?:not|n't|never)\b[^.?!]{0,40}\byet\b|\bfor now\b|\bat the moment\b|目前|暂时|还没",
                      re.IGNORECASE)
"""Words that say the symptom has not happened (yet): `mine looks fine so far`, `it hasn't happened yet`."""
_REPORTING = re.compile(
    r"\b(?:I|we|it|this|i'm|i am|we're|we are|keeps?|kept)\s+(?:\w+\s+)?(?:get|got|getting|gets|see|saw|seeing|hit|"
    r"hits|met|meet|encounter\w*|run into|ran into|runs into)\b|\bhappen(?:s|ed|ing)\b|"
    r"\b(?:already|now|again|still|always|every time|each time)\b|出现了?|遇到", re.IGNORECASE)
"""Words that say the symptom was seen (`why does it keep getting OOM?`, `why would it still be nan?`): a report
phrased as a question."""


def supposed(line: str, carries: Callable[[str], bool], calm: bool = False) -> bool:
    """Whether every sentence of `line` that names the symptom (`carries`: the reader of that symptom, sentence by
    sentence) only asks whether it might happen: under a condition (`will it OOM if ...?`), or beside a `calm` log
    (its losses printed and finite) when it asks what may come (`could it explode later?`) or says nothing happened
    yet (`why would the loss become nan? mine looks fine so far`). `why would X happen?` alone asks about an X seen.
    A worried question raises no alarm without evidence."""
    named = [part for part in sentences(line) if part.strip() and carries(part)]
    not_yet = _NOT_YET.search(line) is not None
    return bool(named) and all(_asks(part, calm, not_yet) for part in named)


def _asks(sentence: str, calm: bool, not_yet: bool) -> bool:
    if not sentence.rstrip().endswith(("?", "？")) or _REPORTING.search(sentence):
        return False
    if _WHY_MODAL.search(sentence):  # `why would it OOM if the model is only 7B?`: asks about an OOM seen
        return calm and not_yet
    return _CONDITION.search(sentence) is not None or calm and (not_yet or _MODAL.search(sentence) is not None)


_STALL = re.compile(r"\b(?:hangs?|hanging|hung|freez\w*|froze|frozen|deadlock\w*)\b|卡住|卡死|死锁", re.IGNORECASE)
"""The run said to stop moving: a hang, whatever its cause, not a loss that stays put (`stuck` may be either)."""
_LOSS_NAMED = re.compile(r"(?<![A-Za-z0-9])(?:[A-Za-z]+[_ ])?loss(?:es)?(?![A-Za-z])|(?<![A-Za-z])(?:ppl|acc)(?![A-Za-z])|"
                         r"perplexity|accuracy|损失|准确率", re.IGNORECASE)
"""The loss (or a metric) named, also where its letters touch Chinese characters (`训练时loss卡住不降`: no word boundary
stands between 时 and l, both word characters)."""
NAN_WORD = re.compile(r"\b(?:nan|inf|non-?finite)s?\b", re.IGNORECASE)
_READERS: dict[str, Callable[[str], bool]] = {
    "nan_loss": lambda part: NAN_WORD.search(part) is not None,
    "loss_flat": lambda part: said.flat_said(part, 0) is not None,
    "loss_zero": lambda part: said.flat_said(part, 0) is not None,
    "loss_diverging": lambda part: said.rise_said(part, 0) is not None,
}
"""Each symptom's reader of a sentence, for `supposed` (the OOM's is `oom_words.said_oom`)."""


def from_words(finding: Finding) -> bool:
    """A finding read from someone's words, not from a number the program printed: a loss said to stay put, rise or
    be zero, a NaN named in a sentence (the loss watch's NaN names the cards it ran on; the text reader's does not)."""
    facts = finding.facts
    return facts.get("kind") == "said" or finding.id == "nan_loss" and "names" not in facts and \
        not facts.get("fp16_floor")


def words_yield(finding: Finding, falling: bool, ran_away: bool, calm: bool = False) -> str:
    """Why a finding gives way to stronger evidence in the same text (it is not shown), or '' when it stands."""
    facts = finding.facts
    if facts.get("withdrawn"):
        return "later evidence explained it away (the loss scaler's first overflows)"
    if falling and facts.get("kind") == "said" and finding.id in ("loss_flat", "loss_diverging") and \
            facts.get("nan_step") is None and not facts.get("overfit"):  # overfitting: training's loss falls
        return "the words say flat or rising, the losses printed fall to their end: the numbers show it"
    if finding.id == "nan_loss" and ran_away:
        return "the NaN the text printed is where the rise ran to: the divergence explains it"
    quote = facts.get("quote")
    if finding.id == "loss_flat" and facts.get("kind") == "said" and isinstance(quote, str) and \
            _STALL.search(quote) and not _LOSS_NAMED.search(quote):
        return "the words say the run stopped moving (a hang), not that its loss stays put"
    if from_words(finding) and isinstance(quote, str) and finding.id in _READERS and \
            supposed(quote, _READERS[finding.id], calm):
        return "the words only ask whether it might happen"
    return ""


def said_oom_yields(text: str, found: set[str], raised: Raised | None, calm: bool = False) -> str:
    """Why an OOM only the person named gives way ('' when it stands): a worried question; anything the text shows
    (another finding, an exception that is no OOM), as their words may tell the run's history (`I got OOM, lowered
    the batch, now ...`)."""
    if supposed(text, oom_words.said_oom, calm):
        return "the words only ask whether it might run out of memory"
    if found:
        return "the text shows " + ", ".join(sorted(found)) + ": the OOM in words is the run's history"
    if raised is not None and not oom.is_oom_line(f"{raised.type}: {raised.message}"):
        return f"the traceback's own error is {raised.short_type}, not an OOM"
    return ""
