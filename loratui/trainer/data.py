"""Examples from a recipe's `[data]` section, tokenised for causal-LM training."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loratui.recipe import DataSection

_FORMATS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


class DataError(Exception):
    """The data cannot be used; the message says which file or field and what to do."""


def load_rows(data: DataSection, base_dir: Path) -> Any:
    """The raw examples as a `datasets.Dataset`."""
    import datasets

    datasets.disable_progress_bars()
    if data.path:
        path = Path(data.path)
        path = path if path.is_absolute() else base_dir / path
        if not path.exists():
            raise DataError(f"[data] path: {path} does not exist; fix the path (relative to the recipe)")
        builder = _FORMATS.get(path.suffix.lower())
        if builder is None:
            raise DataError(f"[data] path: {path.name}: use a .jsonl, .json, .csv or .parquet file")
        rows = datasets.load_dataset(builder, data_files=str(path), split="train")
    else:
        rows = datasets.load_dataset(data.dataset, split=data.split)
    if data.max_samples:
        rows = rows.select(range(min(data.max_samples, len(rows))))
    if len(rows) == 0:
        raise DataError("[data]: the dataset is empty")
    return rows


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


def tokenise(rows: Any, data: DataSection, tokenizer: Any) -> Any:
    """Token ids of every example, truncated to `max_length`, or packed into `max_length` blocks."""
    def encode(batch: dict[str, list[Any]]) -> dict[str, list[list[int]]]:
        keys = list(batch)
        texts = [render({k: batch[k][i] for k in keys}, data, tokenizer) for i in range(len(batch[keys[0]]))]
        ids = tokenizer(texts, add_special_tokens=False, truncation=not data.packing,
                        max_length=data.max_length)["input_ids"]
        return {"input_ids": ids}

    encoded = rows.map(encode, batched=True, remove_columns=rows.column_names)
    if data.packing:
        encoded = encoded.map(lambda b: _pack(b, data.max_length, tokenizer.eos_token_id), batched=True)
    return encoded


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
