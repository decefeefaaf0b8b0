"""xFormers' memory-efficient attention with no kernel for this build is an attention kernel that cannot be used
(flash_attn_unavailable), told as xFormers' (issue 23, wave 12's dev half): not a generic NotImplementedError."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream

NO_OPERATOR = ("NotImplementedError: No operator found for `memory_efficient_attention_forward` with inputs:\n"
               "     query       : shape=(2, 4096, 8, 64) (torch.float16)\n"
               "`cutlassF` is not supported because:\n"
               "    xFormers wasn't build with CUDA support\n")


def first(text: str):
    items = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")[0]
    return items[0] if items else None


@pytest.mark.parametrize("text", [
    NO_OPERATOR,
    "Traceback (most recent call last):\n  File \"train.py\", line 10, in <module>\n" + NO_OPERATOR,
    "WARNING: xFormers was not built with CUDA support, memory_efficient_attention is unavailable\n",
])
def test_xformers_without_a_kernel_is_an_attention_kernel_unavailable(text: str) -> None:
    item = first(text)
    assert item is not None and item.id == "flash_attn_unavailable"
    assert "xFormers" in item.title and item.change == {}


def test_the_flash_attn_package_keeps_its_own_advice() -> None:
    item = first("ImportError: FlashAttention2 has been toggled on, but it cannot be used due to the following "
                 "error: the package flash_attn seems to be not installed.\n")
    assert item is not None and item.id == "flash_attn_unavailable" and "xFormers" not in item.title
