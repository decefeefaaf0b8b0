"""The advisor's one result as text: what every surface (the live panel, headless, alerts, `doctor`,
`replay --summary`) shows, so a run gets one answer wherever it is read.

Each surface folds the same log through an `Advisor`; these functions are the only place its items become
words, so the first line is the same everywhere: the first item's title, then its change as the user would
type it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loratui.logic.recipe_edit import toml_value


def change_lines(change: dict[str, Any]) -> list[str]:
    """A change as the user would type it: `key = value` (TOML values), `NAME=value` for the environment."""
    return [f"{key[4:]}={value}" if key.startswith("env.") else f"{key} = {toml_value(value)}"
            for key, value in change.items()]


def change_line(change: dict[str, Any]) -> str:
    """The change on one line (`change: ` lines of doctor and the alerts)."""
    return ", ".join(change_lines(change))


def headline(items: Sequence[Any]) -> str:
    """The run's first advice: the most important item's title ('' when there is none)."""
    return items[0].title if items else ""


def first_advice(items: Sequence[Any]) -> dict[str, Any] | None:
    """The first advice as JSON-safe values (`replay --summary`), or None."""
    if not items:
        return None
    top = items[0]
    return {"id": top.id, "severity": top.severity, "step": top.step, "title": top.title,
            "change": change_line(top.change)}


__all__ = ["change_line", "change_lines", "first_advice", "headline"]
