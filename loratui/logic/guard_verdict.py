"""Did a guard move work? The verdict on a restarted trainer life, crash loops, and transient failures.

Pure logic: the supervisor (supervisor/unattended.py, supervisor/watch.py) feeds it what the log shows.
A restart is trusted only once its first steps say so: the measured device peak against the estimate the
new life made and the warning line, and the first loss after the resume against the loss logged at the
checkpoint it resumed from. A failure that comes back at the same step, or with no new checkpoint between
two restarts, is a crash loop: restarting again would only burn GPU hours. A failure with no Python error of
its own (a process killed by a signal, an NCCL timeout, an ECC or node error) is transient: it is retried
from the last checkpoint with the recipe unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

GIB = float(1 << 30)
VERIFY_STEPS = 3
"""Steps of the restarted life before the verdict (the peak falls in step 2 and later: DESIGN.md)."""
LOSS_JUMP = 1.5
"""A first loss above this multiple of the checkpoint's (plus a small absolute slack) is not continuous."""
TRANSIENT_IDS = frozenset({"nccl_timeout"})
TRANSIENT_WORDS = ("ecc error", "uncorrectable ecc", "nvlink error", "xid", "node failure", "gpu has fallen off",
                   "unknown error", "connection reset by peer", "broken pipe")


@dataclass
class Expectation:
    """What a guard action promised, to be checked against the restarted life."""

    kind: str  # the action: "oom" | "nan" | "divergence" | "retry"
    resume_step: int
    resume_loss: float | None
    warn_gib: float | None
    steps: int = 0
    losses: list[float] = field(default_factory=list)
    predicted_gib: float | None = None
    bad_step: int = 0  # a NaN's or a divergence's first bad step: the verdict waits until the run is past it
    last_step: int = 0  # the restarted life's last step
    logged_step: int = 0  # the restarted life's last step with a loss logged

    def due(self) -> bool:
        """Whether the restarted life has shown enough: VERIFY_STEPS steps, and past the step that went bad (a NaN
        restarted from step 0 that comes back at step 4 was called recovered at step 3: a newcomer's trial), its
        loss logged there too: a step's record comes before its loss, and trial 14's verdict "recovered" at step 5
        came just before step 5's NaN."""
        return self.steps >= VERIFY_STEPS and self.last_step > self.bad_step and \
            (not self.bad_step or self.logged_step > self.bad_step)


@dataclass(frozen=True)
class Verdict:
    recovered: bool
    evidence: list[str]

    @property
    def title(self) -> str:
        """'guard verdict: recovered' or 'guard verdict: NOT recovered': the alert's title."""
        return f"guard verdict: {'recovered' if self.recovered else 'NOT recovered'}"

    def text(self) -> str:
        """The title and the evidence, once each (the log's notice; the alert sends the evidence under the title)."""
        return f"{self.title}: " + "; ".join(self.evidence)


def judge(expect: Expectation, life_peak: int, gpu: bool, others: int = 0) -> Verdict:
    """The verdict once the restarted life has taken `VERIFY_STEPS` steps (`life_peak`: bytes, the life's own
    device use; `others`: the most other processes held meanwhile, named, never counted)."""
    evidence, ok = [], True
    if gpu and life_peak:
        measured = life_peak / GIB
        said = f"measured peak {measured:.2f} GiB"
        if others >= GIB // 2:
            said += f" (other processes' {others / GIB:.2f} GiB left out)"
        if expect.predicted_gib is not None:
            said += f" vs predicted {expect.predicted_gib:.2f} GiB ({(measured - expect.predicted_gib) / expect.predicted_gib:+.0%})"
        if expect.warn_gib is not None:
            over = measured > expect.warn_gib
            said += f", {'over' if over else 'under'} the {expect.warn_gib:g} GiB warning line"
            ok = ok and not over
        evidence.append(said)
    else:
        evidence.append("no GPU sampled: the peak was not checked")
    finite = [loss for loss in expect.losses if math.isfinite(loss)]
    if len(finite) < len(expect.losses):
        ok = False
        bad = len(expect.losses) - len(finite)  # "(1 of 4 logged)" left the reader to guess 1 of 4 what
        evidence.append(f"the loss was not finite again after the restart ({bad} of the {len(expect.losses)} "
                        f"loss{'es' * (len(expect.losses) != 1)} logged since)")
    elif finite and expect.resume_loss is not None:
        first = finite[0]
        jumped = first > LOSS_JUMP * expect.resume_loss + 0.1
        ok = ok and not jumped
        evidence.append(f"first loss {first:.4g} after resuming at step {expect.resume_step} vs {expect.resume_loss:.4g} "
                        f"at the checkpoint ({'a jump' if jumped else 'continuous'})")
    elif finite:
        evidence.append(f"first loss {finite[0]:.4g} (restarted from the start: nothing to compare)")
    evidence.append(f"{expect.steps} steps since the restart")
    return Verdict(ok, evidence)


@dataclass(frozen=True)
class Failure:
    """A trainer life's failure, as the crash-loop check compares them."""

    kind: str
    step: int
    checkpoint: str | None  # the newest checkpoint when it failed


def crash_loop(before: Failure | None, now: Failure) -> str:
    """Why `now` repeats `before` (one line), or '' when it does not."""
    if before is None or before.kind != now.kind:
        return ""
    if before.step == now.step:
        return f"the same failure ({now.kind}) at the same step ({now.step}) twice"
    if before.checkpoint == now.checkpoint:
        return f"{now.kind} again with no new checkpoint since the last restart ({now.checkpoint or 'none yet'})"
    return ""


def transient(code: int, top_ids: list[str], error_text: str) -> str:
    """Why a failure looks transient (one line), or '' for a deterministic one (a Python error we can read)."""
    lowered = error_text.lower()
    word = next((w for w in TRANSIENT_WORDS if w in lowered), "")
    if word:
        return f"the error says {word!r}"
    if any(i in TRANSIENT_IDS for i in top_ids[:1]):
        return "a collective timed out (a peer or the network, not the recipe)"
    if code < 0 and not top_ids:
        return f"the process was killed by signal {-code} with no Python error"
    return ""


def resume_loss(losses: list[tuple[int, float]], step: int | None) -> float | None:
    """The last finite loss logged at or before `step` (the checkpoint's), or None."""
    found = [loss for s, loss in losses if (step is None or s <= step) and math.isfinite(loss)]
    return found[-1] if found else None
