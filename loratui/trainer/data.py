"""Examples from a recipe's `[data]` section, tokenised for causal-LM training."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from loratui import bounds
from loratui.logic import datafile
from loratui.recipe import DataSection


class DataError(Exception):
    """The data cannot be used; the message says which file or field and what to do."""


def load_rows(data: DataSection, base_dir: Path) -> list[dict[str, Any]]:
    """The raw examples: JSONL/JSON/CSV read directly, parquet and hub names through `datasets`."""
    if data.path:
        path = Path(data.path).expanduser()
        path = path if path.is_absolute() else base_dir / path
        if not path.is_file():
            what = "is a directory" if path.is_dir() else "does not exist"
            raise DataError(f"[data] path: {path} {what}; name one data file (relative to the recipe)")
        rows = _read_file(path, data)
    else:
        rows = _read_hub(data)
    if data.max_samples:
        rows = rows[:data.max_samples]
    if not rows:
        raise DataError("[data]: the dataset is empty")
    return rows


def _read_file(path: Path, data: DataSection) -> list[dict[str, Any]]:
    """Through the same reader as the check before the start (loratui/logic/datafile.py): real line numbers."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import datasets  # parquet needs pyarrow, which datasets brings

        return list(datasets.load_dataset("parquet", data_files=str(path), split="train"))
    try:
        with bounds.open_regular(path) as handle:
            rows = []
            for number, row in datafile.iter_rows(bounds.bounded_lines(handle), suffix):
                datafile.check_row(row, data, number)
                rows.append(row)
                if data.max_samples and len(rows) >= data.max_samples:
                    break
            return rows
    except (datafile.DataFileError, bounds.Refused) as exc:
        at = f"{path}:{exc.line}" if exc.line else str(path)
        raise DataError(f"[data] path: {at}: {exc.message}") from None
    except OSError as exc:  # a FIFO or device where the file was (bounds.NotAFile), a permission...
        raise DataError(f"[data] path: {path}: cannot read it ({exc.strerror or exc})") from None


def _read_hub(data: DataSection) -> list[dict[str, Any]]:
    try:
        import datasets
    except ImportError:
        raise DataError(f"[data] dataset = {data.dataset!r} needs the `datasets` package") from None
    datasets.disable_progress_bars()
    return list(datasets.load_dataset(data.dataset, split=data.split))


def render(row: dict[str, Any], data: DataSection, tokenizer: Any) -> str:
    """One example as training text, by the recipe's `format`."""
    if data.format == "text":
        return str(_field(row, data.text_field))
    if data.format == "instruction":
        prompt = str(_field(row, data.instruction_field))
        extra = row.get(data.input_field) or ""
        if extra:
            prompt = f"{prompt}\n{extra}"
        messages = [{"role": "user", "content": prompt},
                    {"role": "assistant", "content": str(_field(row, data.output_field))}]
    else:
        messages = _field(row, data.messages_field)
    if getattr(tokenizer, "chat_template", None):
        return str(tokenizer.apply_chat_template(messages, tokenize=False))
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in messages) + (tokenizer.eos_token or "")


def _field(row: dict[str, Any], name: str) -> Any:
    if name not in row:
        raise DataError(f"[data]: examples have no field {name!r} (they have {sorted(row)}); "
                        f"set the matching *_field key in [data]")
    return row[name]


def tokenise(rows: list[dict[str, Any]], data: DataSection, tokenizer: Any) -> list[dict[str, list[int]]]:
    """Token ids of every example, truncated to `max_length`, or packed into `max_length` blocks."""
    texts = [render(row, data, tokenizer) for row in rows]
    ids = tokenizer(texts, add_special_tokens=False, truncation=not data.packing,
                    max_length=data.max_length)["input_ids"]
    if data.packing:
        ids = _pack({"input_ids": ids}, data.max_length, tokenizer.eos_token_id)["input_ids"]
    return [{"input_ids": seq} for seq in ids if seq]


def split(examples: list[Any], fraction: float, seed: int) -> tuple[list[Any], list[Any]]:
    """(train, eval): a seeded shuffle, `fraction` of it held out for evaluation."""
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    held = max(1, int(len(order) * fraction))
    return [examples[i] for i in order[held:]], [examples[i] for i in order[:held]]


def _pack(batch: dict[str, list[list[int]]], block: int, eos: int | None) -> dict[str, list[list[int]]]:
    """Concatenate examples (eos between them) and cut into full blocks of `block` tokens."""
    stream: list[int] = []
    for ids in batch["input_ids"]:
        stream.extend(ids)
        if eos is not None and (not ids or ids[-1] != eos):
            stream.append(eos)
    usable = len(stream) // block * block
    return {"input_ids": [stream[i:i + block] for i in range(0, usable, block)]}


class PadCollator:
    """Pads a batch to its longest example; padding is masked out of attention and of the labels."""

    def __init__(self, pad_id: int, multiple_of: int = 8) -> None:
        self.pad_id = pad_id
        self.multiple_of = multiple_of

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        longest = max(len(f["input_ids"]) for f in features)
        width = -(-longest // self.multiple_of) * self.multiple_of
        ids = torch.full((len(features), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(features), width), dtype=torch.long)
        for row, feature in enumerate(features):
            seq = torch.as_tensor(feature["input_ids"], dtype=torch.long)
            ids[row, :len(seq)] = seq
            mask[row, :len(seq)] = 1
        labels = ids.masked_fill(mask == 0, -100)
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}
