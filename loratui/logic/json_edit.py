"""Set top-level keys of a JSON config (LLaMA-Factory reads `llamafactory-cli train x.json` as well as YAML).

JSON keeps no comments, so a round trip loses nothing but layout: the copy is written with the original's
indentation and key order, the changed keys in place and new ones at the end. No header is added either:
LLaMA-Factory's parser refuses a key it does not know, so the copy's name and the confirmation say what
changed. Pure text in, text out; errors say the line, like the YAML editor's.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from loratui import bounds
from loratui.logic.config_keys import MERGED_LISTS, ConfigEditError


def load(text: str) -> dict[str, Any]:
    """The config's top-level object; ConfigEditError for anything else (a hostile shape too)."""
    try:
        bounds.check_text(text)
    except bounds.Refused as exc:
        raise ConfigEditError(exc.line, exc.message) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigEditError(exc.lineno, f"not valid JSON ({exc.msg})") from None
    except (RecursionError, ValueError) as exc:  # what the bounds above should have caught already
        raise ConfigEditError(0, f"not a JSON config loratui can read ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise ConfigEditError(1, "not a JSON object of `\"key\": value` pairs (a config is one object)")
    return data


def apply_changes(text: str, changes: dict[str, Any]) -> str:
    """`text` with each top-level key set (a MERGED_LISTS key's items added to its list); a UTF-8 byte
    order mark stays first."""
    if text.startswith(bounds.BOM):
        return bounds.BOM + apply_changes(text[1:], changes)
    data = load(text)
    for key, value in changes.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigEditError(0, f"{value!r} cannot be written to a config")
        if key in MERGED_LISTS:
            old = data.get(key) or []
            if not isinstance(old, list):
                raise ConfigEditError(0, f"`{key}` is not a list; add {', '.join(map(str, value))} by hand")
            value = [*old, *(item for item in value if item not in old)]
        data[key] = value
    out = json.dumps(data, indent=_indent(text), ensure_ascii=False)
    return out + ("\n" if text.endswith("\n") else "")


def _indent(text: str) -> int | None:
    """The indentation of the first indented line (None: the object was written on one line)."""
    match = re.search(r"\n( +)\S", text)
    if match:
        return len(match.group(1))
    return 2 if "\n" in text.strip() else None
