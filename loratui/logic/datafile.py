"""A data file's examples with their real line numbers, and what the recipe's `format` needs of each.

Shared by the check that runs before anything starts (`loratui run`) and by the trainer, so both say the
same thing about the same line. Pure: the caller opens the file and hands over its lines as bytes.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec

from loratui.recipe import DataSection

_fast_decode = msgspec.json.Decoder().decode

SUFFIXES = (".jsonl", ".json", ".csv")
"""The formats read here; .parquet goes through `datasets` in the trainer."""


class DataFileError(ValueError):
    """One problem in a data file: the 1-based line (None for the whole file) and what to do."""

    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


def iter_rows(lines: Iterable[bytes], suffix: str) -> Iterator[tuple[int | None, dict[str, Any]]]:
    """(line number, example) for each example; raises DataFileError at the first bad line."""
    if suffix == ".jsonl":
        yield from _jsonl(lines)
    elif suffix == ".json":
        yield from _json(b"".join(lines))
    elif suffix == ".csv":
        yield from _csv(lines)
    else:
        raise DataFileError(None, f"a {suffix or 'suffix-less'} file is not read here; use .jsonl, .json, "
                                  ".csv or .parquet")


def check_examples(lines: Iterable[bytes], suffix: str, data: DataSection) -> int:
    """How many examples (up to `max_samples`) the file holds, each with the fields `format` needs."""
    count = 0
    for number, row in iter_rows(lines, suffix):
        check_row(row, data, number)
        count += 1
        if data.max_samples and count >= data.max_samples:
            break
    if not count:
        raise DataFileError(None, "the file has no examples; put one example per line "
                                  f"({_example(data)})")
    return count


def check_row(row: dict[str, Any], data: DataSection, line: int | None) -> None:
    """Refuse an example that lacks (or has the wrong kind of) a field the recipe's `format` reads."""
    for key, name in _needed(data):
        if name not in row:
            raise DataFileError(line, f"the example has no field {name!r} (it has {sorted(row)}); "
                                      f"format = \"{data.format}\" reads it: set [data] {key} to the field "
                                      "that holds it, or fix the example")
        value = row[name]
        if data.format != "chat" and (value is None or isinstance(value, (dict, list))):
            # str() of it was trained on: `"output": null` taught the model to answer "None"
            shown = "null" if value is None else "a JSON " + ("object" if isinstance(value, dict) else "list")
            raise DataFileError(line, f"field {name!r} is {shown}, not text; format = \"{data.format}\" trains "
                                      "on it as text: give it a string, or remove the example")
    if data.format == "chat":
        messages = row[data.messages_field]
        if not isinstance(messages, list) or not all(
                isinstance(m, dict) and "role" in m and "content" in m for m in messages):
            raise DataFileError(line, f"field {data.messages_field!r} must be a list of "
                                      '{"role": ..., "content": ...} messages')


def _needed(data: DataSection) -> list[tuple[str, str]]:
    if data.format == "text":
        return [("text_field", data.text_field)]
    if data.format == "instruction":
        return [("instruction_field", data.instruction_field), ("output_field", data.output_field)]
    return [("messages_field", data.messages_field)]


def _example(data: DataSection) -> str:
    fields = ", ".join(f'"{name}": "..."' for _, name in _needed(data))
    return "{" + fields + "}"


def _decode(raw: bytes, line: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataFileError(line, f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); "
                                  "re-save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)") from None


def _jsonl(lines: Iterable[bytes]) -> Iterator[tuple[int | None, dict[str, Any]]]:
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue  # a blank line holds no example
        try:
            value = _fast_decode(raw)  # msgspec: several times json's speed on a large file
        except msgspec.DecodeError:
            value = _explain_line(raw, number)
        if not isinstance(value, dict):
            raise DataFileError(number, f"a JSON {type(value).__name__}, not an object; each line must be "
                                        "one object such as {\"text\": \"...\"}")
        yield number, value


def _explain_line(raw: bytes, number: int) -> Any:
    """The bad line's problem in the words of the json module (msgspec's only say "malformed")."""
    try:
        return json.loads(_decode(raw, number).rstrip("\r\n"))  # an error at the line's end stays on it
    except json.JSONDecodeError as exc:
        raise DataFileError(number, f"not valid JSON ({exc.msg} at column {exc.colno}); fix or remove "
                                    "this line (one JSON object a line)") from None


def _json(blob: bytes) -> Iterator[tuple[int | None, dict[str, Any]]]:
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataFileError(blob.count(b"\n", 0, exc.start) + 1, "not UTF-8 text; re-save the file as UTF-8") \
            from None
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFileError(exc.lineno, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    for index, value in enumerate(loaded if isinstance(loaded, list) else [loaded], 1):
        if not isinstance(value, dict):
            raise DataFileError(None, f"example {index} is not a JSON object; the file must hold a list "
                                      "of objects")
        yield None, value


def _csv(lines: Iterable[bytes]) -> Iterator[tuple[int | None, dict[str, Any]]]:
    numbered = ((n, raw) for n, raw in enumerate(lines, 1))
    reader = csv.DictReader(_decode(raw, n) for n, raw in numbered)
    try:
        for row in reader:
            yield reader.line_num, {k: v for k, v in row.items() if k is not None}
    except csv.Error as exc:
        raise DataFileError(reader.line_num, f"not valid CSV ({exc})") from None
