"""Apply an advice item's change to a recipe's TOML text, keeping the user's comments and layout.

Pure text in, text out, through `tomlkit`, which round-trips comments, multi-line arrays, inline tables
and dotted keys: the caller writes the result to a new file beside the old one (the user's file is never
edited in place) and validates it with `load_recipe`.
"""

from __future__ import annotations

import posixpath
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import InlineTable

from loratui.bounds import BOM

ADDED_COMMENT = "set by loratui advice"
ADVICE_ENV = frozenset({"PYTORCH_CUDA_ALLOC_CONF", "NCCL_DEBUG", "CUDA_LAUNCH_BLOCKING", "NCCL_P2P_DISABLE",
                        "TF_GPU_ALLOCATOR", "XLA_PYTHON_CLIENT_ALLOCATOR"})
"""The environment variables advice may set: the only ones a restart carries from a run's settings (every one the
advisor proposes: tests/test_config_fix.py checks)."""


class EditError(ValueError):
    """The text cannot take the change (not TOML, or a key where a table should be)."""


def toml_value(value: Any) -> str:
    """A Python value as a TOML literal: the one TOML value writer of the code base."""
    try:
        return str(tomlkit.item(value).as_string())
    except (TypeError, ValueError, TOMLKitError) as exc:
        raise TypeError(f"cannot write {value!r} as TOML") from exc


def recipe_changes(change: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Split an advice change into (recipe keys, environment variables)."""
    keys = {k: v for k, v in change.items() if not k.startswith("env.")}
    env = {k[4:]: str(v) for k, v in change.items() if k.startswith("env.")}
    return keys, env


def apply_changes(text: str, changes: dict[str, Any]) -> str:
    """`text` with each `section.key = value` set: replaced where it is (its comment kept), else added
    to its section (a table, an inline table or dotted keys alike), or in a new section at the end. A
    UTF-8 byte order mark stays first (tomlkit refuses one)."""
    if text.startswith(BOM):
        return BOM + apply_changes(text[1:], changes)
    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as exc:
        raise EditError(f"not valid TOML: {exc}") from None
    for dotted, value in changes.items():
        section, _, key = dotted.partition(".")
        if not key:
            raise EditError(f"`{dotted}`: a change names a [section] key")
        table = doc.get(section)
        if table is None:
            doc.add(section, tomlkit.table())
            table = doc[section]
        if not isinstance(table, dict):
            raise EditError(f"`{section}` is a value, not a [{section}] table")
        if key in table:
            table[key] = value  # tomlkit keeps the old value's trailing comment
        else:
            item = tomlkit.item(value)
            if not isinstance(table, InlineTable):  # an inline table has no room for comments
                item.comment(ADDED_COMMENT)
            table[key] = item
    return str(tomlkit.dumps(doc))


def absolute_data_path(text: str, base: str) -> str:
    """`text` with a relative `[data] path` made absolute against `base` (the folder it was relative to),
    for a copy of a recipe that will live somewhere else."""
    data = tomlkit.parse(text).get("data")
    path = data.get("path") if isinstance(data, dict) else None
    if not isinstance(path, str) or not path or path.startswith(("/", "~")):
        return text
    return apply_changes(text, {"data.path": posixpath.normpath(posixpath.join(base, path))})
