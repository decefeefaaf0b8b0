"""An issue's inline code span opened on the first pasted line and closed on the last (`` `blk.33 ... `` ...
``Killed` ``): the one backtick at a line's edge is the forum's, not the program's, and a line the readers match
whole (the kernel's `Killed`) must read as printed (llama.cpp#5156, wave 29's dev half)."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream
from loratui.logic.text_reader.dialect import without_code_span_edge


@pytest.mark.parametrize(("line", "expected"), [
    ("Killed`", "Killed"),
    ("`blk.33.ffn_up.weight, n_dims = 2", "blk.33.ffn_up.weight, n_dims = 2"),
    ("`RuntimeError: CUDA error`", "`RuntimeError: CUDA error`"),  # a whole quote: tracebacks._unquoted reads it
    ("```python", "```python"),  # a fence
    ("`a` b `c", "`a` b `c"),  # three: which one is the forum's is not known
    ("set `lr` lower", "set `lr` lower"),
    ("it`s done", "it`s done"),  # a backtick inside the line
])
def test_the_one_backtick_at_an_edge_goes(line: str, expected: str) -> None:
    assert without_code_span_edge(line) == expected


def test_a_kill_inside_a_code_span_is_the_hosts_oom_while_converting() -> None:
    text = ("I use python convert-hf-to-gguf.py /Qwen-72B-Chat.\nAnd I am getting the same error:\n"
            "`blk.35.attn_qkv.weight, n_dims = 2, torch.bfloat16 --> float16\n"
            "blk.35.ffn_norm.weight, n_dims = 1, torch.bfloat16 --> float32\nKilled`\n\n"
            "**What does this mean \"Killed\"?**\n")
    items, _ = diagnose_stream(io.BytesIO(text.encode()), "pasted")
    assert items and items[0].id == "oom_at_save", items
