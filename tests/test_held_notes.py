"""An OOM whose note says memory was held outside the program before it allocated anything (an inference server's
start check, TensorFlow's refused start pool, the card's free memory at start) is told as another process's; the
advice knows such a note by the report's `held` flag, not by its first words, so a reworded note keeps its meaning."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream
from loratui.logic import oom
from loratui.logic.advisor.oom_advice import _oom_evidence, _other_process_advice


@pytest.mark.parametrize("text, note", [
    ("ValueError: Free memory on device (59.32/79.15 GiB) on startup is less than desired GPU memory utilization (0.9, "
     "71.24 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
     "only 59.32 GiB of 79.15 GiB was free when the server started"),
    ("RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
     "min_per_gpu_memory=10.5, local_gpu_memory=70.2, local_gpu_memory * 0.9 = 63.2",
     "the server found the cards' free memory unbalanced at start"),
])
def test_a_servers_start_check_says_who_held_the_memory(text: str, note: str) -> None:
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    assert items[0].title == f"CUDA OOM: {note}: other processes hold the card", items[0].title
    assert note in items[0].evidence and not any("numbers ignored" in line for line in items[0].evidence)


def test_a_reworded_held_note_keeps_its_meaning() -> None:
    note = "memory was already taken by others at launch"
    report = oom.OomReport(kind=oom.OTHER_PROCESS, text="out of memory", note=note, held=True)
    advice = _other_process_advice(report, [], 0, _oom_evidence(report, "", 0))
    assert advice.title == f"CUDA OOM: {note}: other processes hold the card"
    assert note in advice.evidence and not any("numbers ignored" in line for line in advice.evidence)


def test_a_note_that_says_only_without_the_flag_is_a_numbers_note() -> None:
    """A note about the message's own numbers, whatever its first word, is said as numbers ignored."""
    report = oom.OomReport(kind=oom.UNKNOWN, text="out of memory", note="only a size beyond any GPU")
    assert "numbers ignored: only a size beyond any GPU" in _oom_evidence(report, "", 0)
