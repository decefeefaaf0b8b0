"""An error pasted as markdown inline code on a line of its own (an issue's `` `RuntimeError: ...` ``) is the error
as printed; a quote inside a sentence that says it is gone stays a mention (one the person says they get is the error
said: tests/test_error_said.py). A card without bfloat16 is named with the move that fits it (issue 23, wave 13's
dev half)."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream


def first(text: str):
    items = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")[0]
    return items[0] if items else None


def test_an_error_quoted_on_its_own_line_is_the_error() -> None:
    item = first("Fine-tuning stops at once, on this:-\n\n"
                 "`AttributeError: 'NoneType' object has no attribute 'shape'`\n\nCan anyone help?\n")
    assert item is not None and item.id == "exception" and "AttributeError" in item.title


@pytest.mark.parametrize("line", [
    # the pattern of sentence-transformers#2745 (dev): bold, and one stray space in under the sentence
    " **ImportError: Using the `Trainer` with `PyTorch` requires `accelerate>=0.20.1`?**",
    "**`AttributeError: 'NoneType' object has no attribute 'shape'`**",
    "__AttributeError: 'NoneType' object has no attribute 'shape'__",
])
def test_an_error_in_bold_on_its_own_line_is_the_error(line: str) -> None:
    item = first("I was trying to fine tune a model and I came across this issue:\n" + line + "\n")
    assert item is not None and item.id == "exception" and "Error" in item.title, item


def test_a_code_line_under_a_traceback_frame_is_still_no_exception() -> None:
    item = first('Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n'
                 '    raise ValueError("bad")\nKeyError: \'labels\'\n')
    assert item is not None and "KeyError" in item.title, item


@pytest.mark.parametrize("text", [
    "I no longer get `KeyError: labels` after the fix.\n",
    "I no longer get **KeyError: labels** after the fix.\n",
    "Before the update I saw `ValueError: Attempting to unscale FP16 gradients.` but it is gone.\n",
])
def test_an_error_quoted_inside_a_sentence_is_a_mention(text: str) -> None:
    item = first(text)
    assert item is None or item.severity not in ("error", "warning")


@pytest.mark.parametrize("message", [
    "RuntimeError: Current CUDA Device does not support bfloat16. Please switch dtype to float16.",
    "ValueError: Your setup doesn't support bf16/gpu. You need torch>=1.10, using Ampere GPU with cuda>=11.0",
    "ValueError: bf16 mixed precision requires PyTorch >= 1.10 and a supported device.",
])
def test_a_card_without_bfloat16_is_told_to_train_in_fp16(message: str) -> None:
    item = first("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n" + message + "\n")
    assert item is not None and item.id == "exception" and "no bfloat16" in item.title and "fp16" in item.title
