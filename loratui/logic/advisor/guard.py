"""The guard's account as advice: its actions, retries and verdicts, so the panel and `doctor` tell them."""

from __future__ import annotations

from loratui.logic.advisor.advice import Advice, Finding
from loratui.recipe import Recipe

KEYS = ("guard", "guard_verdict", "guard_retry")
"""Notice keys the supervisor's guard writes (supervisor/guard.py, supervisor/unattended.py)."""


def guard_advice(f: Finding, r: Recipe | None) -> Advice:
    """The latest guard notice as the title (its level as the severity), every one so far as evidence."""
    lines: list[str] = f.facts["lines"]
    return Advice("guard", f.facts["level"], lines[-1], list(lines), {}, f.step)
