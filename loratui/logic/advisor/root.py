"""Root cause before consequence: the first error any rank printed leads, not what it caused or a warning.

When one rank fails (a KeyError in its collate, a device-side assert, bitsandbytes that cannot load), the others
wait in their next collective until NCCL's watchdog times out, or learn that their peer is gone (`remote
process exited`, `Connection reset by peer`, `NCCL communicator was aborted`), and torchrun ends the rest with
SIGTERM and a ChildFailedError. Those later messages are consequences; a maintainer reads past them to the
first error. A setup warning the run went on past (`flash-attention package not found, consider installing`,
bitsandbytes `compiled without GPU support`) is no cause of a later exception that does not touch that
library. The text's order decides: findings latch in the order their lines came, and each of these findings
counts the exceptions seen before it. Pure.
"""

from __future__ import annotations

import re

from dataclasses import replace

from loratui.logic.advisor.advice import FOUND_AS, INFO, Advice, Finding
from loratui.logic.tracebacks import WRAPPERS, Raised
from loratui.logic.fmt import quoted

STORE_FAILED = re.compile(
    r"retriev\w* ncclUniqueId from \[\d+\].{0,200}?got error|store->get\(.{0,40}?\) got error|"
    r"RendezvousTimeoutError", re.I)
"""A rank that could not fetch the NCCL id from rank 0 through the c10d store (cut before the reason, or with
one other than a timeout), or torchrun's rendezvous that timed out: a rank never arrived, busy alone or dead."""
PEER_GONE = re.compile(
    r"remote process exit|ncclRemoteError|Connection (?:reset|closed) by peer|communicator was aborted|"
    r"watchdog thread terminated|Watchdog caught collective operation timeout|Some NCCL operations have failed|"
    r"\bTCPStore\b.{0,200}?(?:failed|error|broken pipe)|Broken pipe", re.I)
"""What a rank says when another rank is gone or late: never the first cause when an error came before it."""
_FAULT = re.compile(r"device-side assert|illegal memory access|CUDA error: |CUBLAS_STATUS|CUDNN_STATUS|misaligned", re.I)
"""A CUDA fault of its own, even when the watchdog's words wrap it (`watchdog thread terminated with exception:
CUDA error: device-side assert triggered`): a cause, not a consequence."""
CONSEQUENCE_TYPES = WRAPPERS | frozenset({
    "DistBackendError", "DistStoreError", "DistNetworkError", "SignalException", "KeyboardInterrupt", "SystemExit"})
"""Exceptions raised because another process failed, or because the launcher ended this one."""
ROOTS = ("cuda_error", "bnb_setup", "flash_attn_unavailable")
"""Findings that are a cause in themselves, when their line is not a peer's failure."""
ORDERED = ROOTS + ("nccl_timeout",)
"""The findings that count the exceptions raised before them when they latch (`raised_before`)."""
WARNED = re.compile(r"warn(?:ing|ings)?\b|consider install|fall(?:ing)? ?back|Either upgrade or use|"
                    r"\bwill (?:be used|use)\b|\binstead\b|\bunavailable\b|"
                    r"\bLoading binary\b[^\n]{0,300}?libbitsandbytes_cpu\.(?:so|dll|dylib)", re.I)
"""A setup line that says the run goes on without the library (slower, or without 8-bit), not that it stopped:
bitsandbytes' `CUDA SETUP: Loading binary ...libbitsandbytes_cpu.so` too (it loads its CPU build and goes on)."""
_RAISED_LINE = re.compile(r"^\W*(?:\[[^\]]{0,40}\]:?\s*)*(?:[A-Za-z_]\w*\.){0,6}[A-Z]\w*(?:Error|Exception)\b")
_LIBRARY = {"flash_attn_unavailable": re.compile(r"flash|fa2|attn_implementation", re.I),
            "bnb_setup": re.compile(r"bitsandbytes|\bbnb\b|cuda[ _]setup|[48][ -]?bit|32bit|quantiz|blockwise|nf4|fp4|libcudart", re.I)}
"""Words by which an exception touches the library a setup finding is about."""


STALLED = re.compile(
    r"failed to pass monitoredBarrier|Timed out waiting \d+ ?ms for (?:send|recv) operation|"
    r"watchdog got stuck for \d+ seconds|Heartbeat monitor timed out|"
    r"waiting for (?:the )?remainder of ranks for more than \d+ seconds|\bStalled ranks:|"
    r"Waiting in store based barrier", re.I)
"""A collective the ranks did not all reach, in the words of layers beside NCCL's watchdog: gloo's monitored
barrier and its transport, torch's heartbeat monitor over a stuck watchdog, Horovod's stall check, torch's store
based barrier at the process group's start (`Waiting in store based barrier ... (world_size=8, worker_count=7`,
printed while a rank is late; its final `Timed out initializing process group in store based barrier` is text.py's
timeout)."""
WORDS = ("got error", "Rendezvous", "monitoredBarrier", "Timed out waiting", "watchdog got stuck", "Heartbeat monitor",
         "remainder of ranks", "Stalled ranks", "store based barrier")
"""One of these is in every line STORE_FAILED or STALLED reads (a cheap test before the regexes)."""
_MS = re.compile(r"(\d+) ?ms\b|(\d+) seconds")
_BARRIER = re.compile(r"store based barrier.{0,200}?world_size=(\d+), worker_count=(\d+)", re.I)


def store_finding(line: str, step: int) -> Finding | None:
    """A rendezvous that failed (a store error whose reason is cut or is not a timeout, torchrun's rendezvous
    timeout) or a collective some rank never reached, as nccl_timeout facts; None for any other line."""
    store = STORE_FAILED.search(line) is not None
    if not store and STALLED.search(line) is None:
        return None
    limit = _MS.search(line) if not store else None
    timeout_ms = (int(limit.group(1)) if limit.group(1) else int(limit.group(2)) * 1000) if limit else 0
    facts = {"line": quoted(line, 400), "op": "rendezvous" if store else "", "timeout_ms": timeout_ms, "ran_ms": 0}
    barrier = _BARRIER.search(line)
    if barrier is not None:  # the ranks' start, still waiting: how many arrived (nccl_advice says only that)
        facts["arrived"] = f"{barrier.group(2)} of {barrier.group(1)}"
    return Finding("nccl_timeout", step, facts)


def is_consequence(finding: Finding) -> bool:
    """A finding that reports another rank's failure: any timeout, a cuda_error that is only a peer gone."""
    if finding.id == "nccl_timeout":
        return True
    line = str(finding.facts.get("line", ""))
    return finding.id == "cuda_error" and PEER_GONE.search(line) is not None and _FAULT.search(line) is None


def root_exception(raised: Raised | None) -> bool:
    """An exception that is a cause in itself: not a wrapper, a signal or a distributed failure."""
    if raised is None or raised.short_type in CONSEQUENCE_TYPES:
        return False
    message = raised.message
    return PEER_GONE.search(message) is None and STORE_FAILED.search(message) is None and \
        STALLED.search(message) is None and "timed out" not in message.lower()


def first_root(found: dict[str, Finding], raised: Raised | None, raised_count: int) -> str:
    """The id of the root cause to lead with ('exception' for the chosen exception), or '' to keep the order:
    the first root before the first consequence (else that consequence, before any later one it led to), the
    first root when no consequence came, or the exception after a setup warning it does not touch."""
    root = ""
    for finding in found.values():
        if is_consequence(finding):
            if not root and finding.facts.get("raised_before", 0) > 0 and root_exception(raised):
                root = "exception"
            return root or finding.id  # no cause before it: the first consequence says most (a timeout)
        if finding.id in ROOTS and not root and not _warning(finding):
            root = finding.id
    if root:
        return root  # the first error of its own (a CUDA setup failure before the bitsandbytes one it caused)
    setup = next((f for f in found.values() if f.id in _LIBRARY), None)
    return "exception" if setup is not None and _warned_past(setup, raised, raised_count) else ""


def _warning(finding: Finding) -> bool:
    """A setup finding whose line is a warning the run goes on past, not an error raised."""
    line = str(finding.facts.get("line", ""))
    return finding.id in _LIBRARY and WARNED.search(line) is not None and _RAISED_LINE.match(line) is None


def _warned_past(finding: Finding, raised: Raised | None, raised_count: int) -> bool:
    """A setup warning the run went on past, then an exception that does not touch its library."""
    if raised is None or raised_count <= finding.facts.get("raised_before", raised_count) or \
            not _warning(finding) or not root_exception(raised):
        return False
    words = _LIBRARY[finding.id]
    touched = [raised.type, raised.message] + [f"{frame.path} {frame.func}" for frame in raised.frames]
    return not any(words.search(text) for text in touched)


def interrupted(items: list[Advice], raised: Raised | None) -> list[Advice]:
    """A KeyboardInterrupt is someone stopping the run (Ctrl-C, a notebook's stop button), not a failure: its
    item becomes a note after everything else the text shows (what made them stop it: a crawl, a hang)."""
    if raised is None or raised.short_type != "KeyboardInterrupt":
        return items
    where = f" in {raised.frames[-1].func}()" if raised.frames and not raised.frames[-1].func.startswith("<") \
        else ""
    note = [replace(a, severity=INFO, change={}, title=f"The run was stopped by hand (KeyboardInterrupt{where}): "
                    "nothing failed there; if it was stuck or slow, the lines before it say where")
            for a in items if a.id == "exception"]
    return [a for a in items if a.id != "exception"] + note


TRAINED_ON = 2
"""Logged steps after a setup warning that show the run trained on without the library."""
_WENT_ON = {"flash_attn_unavailable": "flash-attention is not available, and the run trained on without it "
                                      "(slower attention): install it only for speed",
            "bnb_setup": "bitsandbytes cannot use the GPU, and the run trained on without it: 8-bit/4-bit "
                         "loading and 8-bit optimizers need a CUDA build (pip install -U bitsandbytes)"}


_SDPA_NOTE = re.compile(r"Torch was not compiled with flash attention", re.I)
"""torch's own SDPA warning (Windows wheels): it runs its memory-efficient kernel instead, nothing failed."""


def went_on(advice: Advice, finding: Finding | None, step: int, failed: bool) -> Advice:
    """A setup warning's advice as a note when training logged steps after it (no failure came): the run
    works without the library. torch's SDPA note that its build has no flash kernel is always a note."""
    if finding is not None and advice.id == "flash_attn_unavailable" and _SDPA_NOTE.search(finding.facts["line"]):
        return replace(advice, severity=INFO, change={},
                       title="This torch build's scaled_dot_product_attention has no flash kernel (Windows wheels): "
                             "it uses its memory-efficient kernel instead; nothing failed",
                       evidence=[finding.facts["line"], "a build with it (Linux wheels) or flash-attn is faster, "
                                 "not needed"])
    if failed or finding is None or advice.id not in _WENT_ON or not _warning(finding) or \
            step < finding.step + TRAINED_ON:
        return advice
    return replace(advice, severity=INFO, title=_WENT_ON[advice.id],
                   evidence=advice.evidence + [f"training went on to step {step} after it"])


def lead_with(items: list[Advice], root: str, found: dict[str, Finding] | None = None) -> list[Advice]:
    """The advice with the root's item first (the rest keep their order); when a distributed consequence came
    after it, the root's evidence says so."""
    lead = [a for a in items if FOUND_AS.get(a.id, a.id) == root][:1]
    rest = [a for a in items if a not in lead]
    found = found or {}
    after = [f for f in found.values() if f.id != root and is_consequence(f)]
    if lead and after and not (root in found and is_consequence(found[root])):
        what = "timeout" if after[0].id == "nccl_timeout" else "failure"
        lead = [replace(lead[0], evidence=lead[0].evidence + [
            f"the distributed {what} printed after it is its consequence: the other ranks waited for this one"])]
    return lead + rest
