"""The learned-fallback experiment (bench/learned_cv.py, docs/learned_fallback.md) trains and scores on the dev
split alone: a sealed record must never reach it, and every dev record must."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("sklearn")  # the `experiments` extra; loratui itself never imports it
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from learned_cv import dev_rows  # noqa: E402
from test_corpus import ROWS, split_of  # noqa: E402


def test_the_experiment_reads_every_dev_record_and_no_sealed_one() -> None:
    read = dev_rows()
    assert all(row.get("split", "dev") != "sealed" for row in read)
    assert sorted(row["file"] for row in read) == sorted(row["file"] for row in ROWS if split_of(row) == "dev")
