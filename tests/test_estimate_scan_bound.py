"""Review 7: the estimate at train begin read up to 20,000 examples of a watched script's dataset in rank 0. With a
__getitem__ of 1 ms (a lazy transform), the user's first step came 24 s late (bench/slow_dataset_start.py). It now
reads for about SCAN_S at most, a sample spread over the whole dataset, and says that it is a sample."""

from __future__ import annotations

import time
from types import SimpleNamespace

from loratui.trainer.preflight import SCAN_S, longest_example


class Slow:
    """20,000 examples whose __getitem__ takes 1 ms; it notes which were read."""

    def __init__(self, n: int = 20_000) -> None:
        self.n, self.read = n, []

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, list[int]]:
        self.read.append(i)
        time.sleep(0.001)
        return {"input_ids": [1] * (8 + i % 24)}


def test_a_slow_dataset_is_read_for_a_bounded_time_over_its_whole_length() -> None:
    data = Slow()
    seq_len, max_length, how = longest_example(SimpleNamespace(), data)
    assert len(data.read) <= SCAN_S / 0.001 + 1  # each read takes 1 ms or more: 20,000 reads before
    assert max(data.read) > 15_000 and min(data.read) < 5_000  # spread over the dataset, not its first items
    assert seq_len == max(8 + i % 24 for i in data.read) and max_length is None
    assert how == f"the longest of a sample of {len(set(data.read))} of the 20000 examples", how


def test_a_quick_dataset_is_read_whole() -> None:
    data = Slow(60)
    assert longest_example(SimpleNamespace(max_length=64), data) == (31, 64, "the longest example")
    assert sorted(data.read) == list(range(60))


def test_a_datasets_table_with_a_slow_transform_is_bounded_too() -> None:
    from datasets import Dataset

    calls = []

    def transform(batch: dict[str, list[list[int]]]) -> dict[str, list[list[int]]]:
        calls.append(len(batch["input_ids"]))
        time.sleep(0.001 * len(batch["input_ids"]))
        return batch

    table = Dataset.from_dict({"input_ids": [[1] * (8 + i % 24) for i in range(20_000)]})
    table.set_transform(transform)
    seq_len, _, how = longest_example(SimpleNamespace(), table)
    assert sum(calls) < 5_000 and "a sample of" in how and 8 <= seq_len <= 31, (sum(calls), how)
    plain = Dataset.from_dict({"input_ids": [[1] * (8 + i % 24) for i in range(300)]})
    assert longest_example(SimpleNamespace(), plain) == (31, None, "the longest example")


def test_the_estimate_notice_says_its_length_is_a_samples() -> None:
    from typing import Any

    from loratui import events
    from loratui.recipe import load_recipe
    from loratui.trainer.preflight import record_estimate
    from tests.conftest import SMALL_QWEN2, TINY

    written: list[Any] = []
    model = SimpleNamespace(config=SimpleNamespace(to_dict=lambda: {**SMALL_QWEN2, "tie_word_embeddings": True}))
    how = "the longest of a sample of 180 of the 20000 examples"
    record_estimate(written.append, load_recipe(TINY), model, False, 0, 31, None, how)
    (notice,) = [e.message for e in written if isinstance(e, events.Notice) and e.key == "estimate"]
    assert notice.startswith(f"estimate at {how} (31 tokens): "), notice
