"""Issue 23: the model's code saying it runs without flash-attention (it is not installed or cannot be used here), in
words that name no error: `You are not running the flash-attention implementation`, `falling back to eager`. The
dev line is quoted with its source; the others are our own wordings; the person's own choice not to use it is none."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream


def first_id(text: str) -> str:
    items = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")[0]
    return items[0].id if items else ""


@pytest.mark.parametrize("line", [
    # https://github.com/microsoft/PhiCookBook/issues/115
    "WARNING:transformers_modules.microsoft.Phi-3-mini-4k-instruct.c1358f8a35e6d2af81890deffbbfa575b978c62f."
    "modeling_phi3:You are not running the flash-attention implementation, expect numerical differences.",
    "Flash attention is not used, falling back to eager attention.",
    "Flash Attention 2 is not being used for this model.",
    "The model is not using flash_attention_2, falling back to the math kernel.",
])
def test_the_model_running_without_flash_attention(line: str) -> None:
    """Mechanism: the model's code says it runs without flash-attention, or falls back from it: it is unavailable."""
    assert first_id(line) == "flash_attn_unavailable"


@pytest.mark.parametrize("line", [
    "I am not using flash attention and the loss is fine.",
    "Using flash attention 2 for training.",
])
def test_flash_attention_in_use_or_not_chosen_is_no_finding(line: str) -> None:
    assert first_id(line) != "flash_attn_unavailable"
