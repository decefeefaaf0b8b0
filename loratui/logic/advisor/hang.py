"""Advice for a run that looks hung (the supervisor's `hung` notice, see logic/hang.py)."""

from __future__ import annotations

from loratui.logic.advisor.advice import ERROR, Advice, Finding
from loratui.recipe import Recipe


def hung_advice(f: Finding, r: Recipe | None) -> Advice:
    """No step for many times the usual interval with an idle GPU: show where every rank waits."""
    evidence = [f.facts["message"],
                "`loratui stacks RUN` (or `k` in the app) records every thread's stack of every rank in the "
                "log: a rank in a collective (all_reduce, barrier) waits for another; one in a DataLoader "
                "waits for a worker",
                "a rank that died or went its own way leaves the others in a collective until NCCL's "
                "timeout; NCCL_DEBUG=INFO names the collective"]
    return Advice("run_hung", ERROR, "No step for a long time and the GPU is idle: the run looks hung",
                  evidence, {}, f.step)
