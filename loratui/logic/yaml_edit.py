"""Set top-level keys of a YAML config (LLaMA-Factory, axolotl) in its text, changing nothing else.

ruamel.yaml parses the text and says where each key and value is; the edit then replaces only the text of
the values it changes (their comments kept) and adds missing keys at the end, so the user's layout, quoting
and comments stay byte for byte (a full round-trip dump would reindent lists and rewrap long lines). The
result is parsed again and must equal the old data with exactly the named keys changed, or nothing is
returned. Pure text in, text out: the caller writes it to a new file beside the old one.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from loratui import bounds
from loratui.logic.config_keys import MERGED_LISTS, ConfigEditError

ADDED_COMMENT = "set by loratui advice"
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.,/-]*")
_RESERVED = frozenset({"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~"})
"""Plain words that YAML 1.1 (PyYAML, which both tools read with) would not read as a string."""
_COMPLEX = tuple("|>{&*!%@`")


def load(text: str) -> CommentedMap:
    """The config's top-level mapping, with positions; ConfigEditError for anything else (a hostile shape
    too: see config_bounds)."""
    try:
        bounds.check_text(text)
    except bounds.Refused as exc:
        raise ConfigEditError(exc.line, exc.message) from None
    yaml = YAML(typ="rt")
    try:
        data = yaml.load(text)
    except (RecursionError, ValueError) as exc:  # what the bounds above should have caught already
        raise ConfigEditError(0, f"not a YAML config loratui can read ({type(exc).__name__})") from None
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).strip().splitlines()[0]
        raise ConfigEditError(mark.line + 1 if mark is not None else 0, f"not valid YAML ({problem})") from None
    if not isinstance(data, CommentedMap) or data.fa.flow_style():
        raise ConfigEditError(1, "not a block of `key: value` lines (a config is one YAML mapping)")
    try:
        bounds.check_expanded(data)
    except bounds.Refused as exc:
        raise ConfigEditError(exc.line, exc.message) from None
    return data


def scalar(value: Any) -> str:
    """A value as YAML text that YAML 1.1 and 1.2 both read back as the same value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigEditError(0, f"{value!r} cannot be written to a config")
        text = repr(value)
        mantissa, e, exponent = text.partition("e")
        return f"{mantissa}.0e{exponent}" if e and "." not in mantissa else text  # PyYAML reads 1e-05 as a string
    if isinstance(value, str):
        plain = _PLAIN.fullmatch(value) and value.lower() not in _RESERVED
        return value if plain else '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(scalar(item) for item in value) + "]"
    raise ConfigEditError(0, f"{value!r} cannot be written to a config")


def apply_changes(text: str, changes: dict[str, Any], header: str = "") -> str:
    """`text` with each top-level `key: value` set (a MERGED_LISTS key's items added to its list), a
    `# header` line first; ConfigEditError where the text cannot take a change safely. A UTF-8 byte order
    mark stays the copy's first character (YAML allows one only there)."""
    if text.startswith(bounds.BOM):
        return bounds.BOM + apply_changes(text[1:], changes, header)
    data = load(text)
    lines = text.split("\n")
    expected = _plain(data)
    own = {key for key, _ in data.non_merged_items()}
    added: list[str] = []
    inserts: dict[int, list[str]] = {}  # after line index -> new lines
    for key, value in changes.items():
        if key in MERGED_LISTS:
            new = [item for item in value if item not in (data.get(key) or [])]
            expected[key] = [*(expected.get(key) or []), *new]
            if new:
                _add_items(data, lines, key, new, own, added, inserts)
            continue
        expected[key] = value
        if key in own:
            _replace(data, lines, key, value)
        else:
            added.append(f"{key}: {scalar(value)}  # {ADDED_COMMENT}")
    out = _assemble(lines, inserts, added, header)
    if repr(_plain(load(out))) != repr(expected):  # the safety net: nothing but the named keys changed
        raise ConfigEditError(0, f"could not rewrite {', '.join(changes)} safely; change them by hand")
    return out


def _assemble(lines: list[str], inserts: dict[int, list[str]], added: list[str], header: str) -> str:
    cr = "\r" if lines and lines[0].endswith("\r") else ""
    out: list[str] = []
    for index, line in enumerate(lines):
        out.append(line)
        out += [new + cr for new in inserts.get(index, [])]
    if added:
        if out and out[-1] == "":
            out.pop()  # the text's final newline: the added keys go before it
        out += [new + cr for new in added] + [""]
    body = "\n".join(out)
    return ("".join(f"# {line}{cr}\n" for line in header.split("\n")) if header else "") + body


def _replace(data: CommentedMap, lines: list[str], key: str, value: Any) -> None:
    """Replace the value text of `key: old  # comment` on its one line, keeping the spacing and comment."""
    row, col = data.lc.key(key)
    line = lines[row]
    body, cr = (line[:-1], "\r") if line.endswith("\r") else (line, "")
    old = data[key]
    if col != 0 or not body.startswith(f"{key}:") or isinstance(old, (CommentedMap, CommentedSeq)) \
            or _continues(data, lines, row):
        raise ConfigEditError(row + 1, f"`{key}` is not a one-line `{key}: value`; change it by hand")
    rest = body[len(key) + 1:]
    lead = rest[:len(rest) - len(rest.lstrip())]
    token = _token(rest[len(lead):], row, key)
    tail = rest[len(lead) + len(token):]
    lines[row] = f"{key}:{lead or ' '}{scalar(value)}{tail}{cr}"


def _token(rest: str, row: int, key: str) -> str:
    """The value's own text at the start of `rest` (a quoted or plain scalar; '' for none)."""
    if not rest or rest.startswith("#"):
        return ""
    if rest.startswith(_COMPLEX) or rest.startswith("["):
        raise ConfigEditError(row + 1, f"`{key}` has a value loratui does not rewrite; change it by hand")
    if rest[0] in "'\"":
        end = _closing_quote(rest)
        if end < 0:
            raise ConfigEditError(row + 1, f"`{key}`: its quoted value does not end on its line; change it by hand")
        return rest[:end + 1]
    match = re.search(r"\s#", rest)
    return rest[:match.start() if match else len(rest)].rstrip()


def _closing_quote(rest: str) -> int:
    quote, index = rest[0], 1
    while index < len(rest):
        char = rest[index]
        if quote == '"' and char == "\\":
            index += 2
            continue
        if char == quote:
            if quote == "'" and rest[index + 1:index + 2] == "'":
                index += 2  # '' is an escaped quote inside single quotes
                continue
            return index
        index += 1
    return -1


def _continues(data: CommentedMap, lines: list[str], row: int) -> bool:
    """Whether the value at `row` runs onto the lines after it (before the next top-level key)."""
    later = [data.lc.key(k)[0] for k, _ in data.non_merged_items() if data.lc.key(k)[0] > row]
    stop = min(later, default=len(lines))
    return any(line.strip() and not line.strip().startswith("#") for line in lines[row + 1:stop])


def _add_items(data: CommentedMap, lines: list[str], key: str, new: list[Any], own: set[str], added: list[str],
               inserts: dict[int, list[str]]) -> None:
    """Add `new` to the list at `key`: a new key, items after the block list's last, or `key: [..]`."""
    old = data.get(key) if key in own else None
    if key not in own:
        added += [f"{key}:  # {ADDED_COMMENT}"] + [f"  - {scalar(item)}" for item in new]
    elif old is None:
        _replace(data, lines, key, new)
    elif isinstance(old, CommentedSeq) and len(old) and not old.fa.flow_style():
        row, col = old.lc.item(len(old) - 1)
        prefix = lines[row][:col]
        if not re.fullmatch(r"\s*-\s+", prefix) or _continues(data, lines, row):
            raise ConfigEditError(row + 1, f"`{key}`: add {', '.join(map(str, new))} to this list by hand")
        inserts.setdefault(row, []).extend(f"{prefix}{scalar(item)}  # {ADDED_COMMENT}" for item in new)
    else:
        row = data.lc.key(key)[0]
        raise ConfigEditError(row + 1, f"`{key}`: add {', '.join(map(str, new))} to it by hand")


def _plain(node: Any) -> Any:
    """ruamel's commented containers as plain dicts and lists (for comparing data, not text)."""
    if isinstance(node, dict):
        return {key: _plain(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_plain(item) for item in node]
    for kind in (bool, int, float, str):  # ruamel's ScalarFloat, ScalarInt... as the plain type they hold
        if isinstance(node, kind):
            return kind(node)
    return node
