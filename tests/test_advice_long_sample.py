"""An OOM on one unusually long batch asks for truncation, not a smaller batch everywhere."""

from __future__ import annotations

from pathlib import Path

import msgspec

from loratui import events
from loratui.logic.advisor import Advisor
from loratui.recipe import load_recipe
from tests import scenarios
from tests.conftest import REPO

FULL_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB. GPU 0 has a total capacity "
            "of 31.36 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 30.32 GiB "
            "memory in use. Of the allocated memory 29.70 GiB is allocated by PyTorch, and 0.12 GiB is reserved "
            "by PyTorch but unallocated.")


def _run(batch_len: int | None) -> list[events.AnyEvent]:
    found = []
    for event in scenarios.run(20):
        if isinstance(event, events.Step):
            event = msgspec.structs.replace(event, max_len=128 + 8 * (event.step % 3))
        found.append(event)
    t = found[-1].t + 1
    if batch_len is not None:
        found.append(events.Notice(t=t, level="error", key="oom_batch",
                                   message=f"out of memory on a batch of sequence length {batch_len}"))
    found.append(events.Output(t=t, stream="stderr", lines=["Traceback (most recent call last):", FULL_OOM]))
    found.append(events.End(t=t + 1, state=events.FAILED, exit_code=1))
    return found


def _oom_items(found: list[events.AnyEvent]):  # type: ignore[no-untyped-def]
    recipe = load_recipe(REPO / "recipes" / "qwen7b.toml")
    return [a for a in Advisor(recipe).feed_all(found).items() if a.id.startswith("oom")]


def test_one_long_batch_gets_truncation() -> None:
    items = _oom_items(_run(1024))
    assert items[0].id == "oom_full" and items[0].change == {"data.max_length": 256}
    assert "1024 tokens" in items[0].title


def test_a_batch_of_usual_length_gets_the_memory_moves() -> None:
    items = _oom_items(_run(136))
    assert items[0].id == "oom_full" and "data.max_length" not in items[0].change


def test_without_the_trainer_notice_nothing_is_guessed() -> None:
    items = _oom_items(_run(None))
    assert items[0].id == "oom_full" and "data.max_length" not in items[0].change


def test_token_counter_records_batch_lengths() -> None:
    import torch

    from loratui.trainer.callback import TokenCounter

    counter = TokenCounter()
    module = type("M", (), {"training": True})()
    counter.hook(module, (), {"input_ids": torch.ones(2, 96, dtype=torch.long),
                              "attention_mask": torch.ones(2, 96, dtype=torch.long)})
    counter.hook(module, (), {"input_ids": torch.ones(2, 40, dtype=torch.long)})
    assert counter.step_len == 96 and counter.last_len == 40
    assert Path(REPO / "loratui" / "trainer" / "__main__.py").read_text().count("oom_batch") == 1
