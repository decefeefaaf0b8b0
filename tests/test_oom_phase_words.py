"""Issue 23: an OOM's phase and cause in words a reader has not seen before. Each rule names the mechanism it reads;
the dev lines that motivated it are quoted with their source, and wordings of our own (other verbs, tools, numbers,
Chinese) show it reads the mechanism, not the excerpt; negatives show healthy text and other failures keep their
answer."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream
from loratui.logic.advisor import phase_text


def first_id(text: str) -> str:
    """The id of the doctor's first item for a pasted text ('' when it finds nothing)."""
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return items[0].id if items else ""


JAX_OOM = "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 2147483648 bytes."


@pytest.mark.parametrize("words", [
    "Setting XLA_PYTHON_CLIENT_ALLOCATOR=platform fixed the OOM for me.",
    "With XLA_PYTHON_CLIENT_ALLOCATOR=platform the OOM is gone.",
    "os.environ['XLA_PYTHON_CLIENT_ALLOCATOR'] = 'platform' solved this OOM.",
])
def test_xlas_allocator_remedy_is_read_in_any_case(words: str) -> None:
    """The cheap test before the cause's words compares lowered text: a hint in capitals (`XLA_PYTHON`) never
    matched, so XLA's platform allocator, the JAX remedy for fragmentation, was never read as one."""
    assert first_id(JAX_OOM + "\n" + words) == "oom_fragmentation"


def test_every_cause_hint_is_lower_case() -> None:
    """The hints are checked against lowered text: one with a capital letter could never match."""
    assert all(hint == hint.lower() for hint in phase_text._CAUSE_HINTS)
