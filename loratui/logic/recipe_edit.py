"""Apply an advice item's change to a recipe's TOML text, keeping the user's comments and layout.

Pure text in, text out: the caller writes the result to a new file beside the old one (the user's file
is never edited in place) and validates it with `load_recipe`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from loratui.recipe import find_key_line


def toml_value(value: Any) -> str:
    """A Python value as a TOML literal."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML")


def recipe_changes(change: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Split an advice change into (recipe keys, environment variables)."""
    keys = {k: v for k, v in change.items() if not k.startswith("env.")}
    env = {k[4:]: str(v) for k, v in change.items() if k.startswith("env.")}
    return keys, env


def apply_changes(text: str, changes: dict[str, Any]) -> str:
    """`text` with each `section.key = value` set: replaced where it is, added under its section."""
    for dotted, value in changes.items():
        text = _set_key(text, dotted, value)
    return text


def _set_key(text: str, dotted: str, value: Any) -> str:
    section, _, key = dotted.partition(".")
    lines = text.splitlines()
    literal = toml_value(value)
    line_no = find_key_line(text, dotted)
    if line_no is not None and re.match(rf"^\s*{re.escape(key)}\s*=", lines[line_no - 1]):
        old = lines[line_no - 1]
        comment = _trailing_comment(old)
        indent = old[:len(old) - len(old.lstrip())]
        lines[line_no - 1] = f"{indent}{key} = {literal}" + (f"  {comment}" if comment else "")
    elif line_no is not None:  # the section exists without the key: add it right under the header
        lines.insert(line_no, f"{key} = {literal}  # set by loratui advice")
    else:
        lines += ["", f"[{section}]", f"{key} = {literal}  # set by loratui advice"]
    return "\n".join(lines) + "\n"


def _trailing_comment(line: str) -> str:
    """The `# ...` comment after a value (outside any string), or ''."""
    in_string = ""
    for i, ch in enumerate(line):
        if in_string:
            if ch == in_string:
                in_string = ""
        elif ch in "\"'":
            in_string = ch
        elif ch == "#":
            return line[i:].strip()
    return ""
