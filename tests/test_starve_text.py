"""Data starvation read from text alone (issue 23): loader meters where Data is most of Time, and dataset
preprocessing bars that crawl for many minutes. Lines are in the printed formats of PyTorch's examples
(`Time x (avg)  Data y (avg)`), MMEngine/LAVIS (`time: x  data: y`) and `datasets`' map bars."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loratui.cli import main


def doctor(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[dict]:
    path = tmp_path / "pasted.txt"
    path.write_text(text, encoding="utf-8")
    main(["doctor", str(path), "--json"])
    return json.loads(capsys.readouterr().out)


STARVED_METERS = "".join(
    f"Epoch: [0][{i}/5005]\tTime {t} ({avg})\tData {d} ({davg})\tLoss 6.9076 (6.9079)\tPrec@1 0.000 (0.023)\n"
    for i, t, avg, d, davg in [(15, 0.154, 7.519, 0.001, 7.237), (16, 67.619, 11.054, 67.544, 10.785)])
FED_METERS = "".join(
    f"Train: data epoch: [0]  [{i}/5000]  eta: 0:08:37  lr: 0.000029  loss: {2.5 - i / 10000:.4f}  "
    f"time: 0.49{i % 10}0  data: 0.0000  max mem: 43374\n" for i in range(50, 450, 50))


def test_a_loop_that_waits_for_data_most_of_each_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = doctor(STARVED_METERS, tmp_path, capsys)
    assert items[0]["id"] == "data_starved" and "waits for data" in items[0]["title"], items
    assert "num_workers" in items[0]["title"]


def test_a_loop_whose_data_comes_at_once_is_not_starved(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert doctor(FED_METERS, tmp_path, capsys) == []


def test_a_preprocessing_bar_that_crawls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = ("Running tokenizer on dataset (num_proc=16):  12%|█▏        | 42000/364345 [08:38<1:07:19, "
            "81.00 examples/s]\n")
    items = doctor(text, tmp_path, capsys)
    assert items[0]["id"] == "data_starved" and "about 76 min" in items[0]["title"]
    assert "ddp_timeout" in json.dumps(items[0])


def test_a_quick_map_is_not_starvation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = "Map: 100%|██████████| 1000/1000 [00:01<00:00, 812.34 examples/s]\n"
    assert doctor(text, tmp_path, capsys) == []


def test_a_stall_among_quick_steps_counts_for_what_it_cost(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A data timer beside a compute-only step timer: one 19.6 s wait among 0.65 s steps is most of the time."""
    text = "".join(f"load_data_time: {d}, train_step_time: {t}\n" for d, t in
                   [(0.0001, 0.665), (0.0001, 0.652), (0.0001, 0.640), (19.6173, 0.686), (0.0002, 0.664)])
    items = doctor(text, tmp_path, capsys)
    assert items[0]["id"] == "data_starved" and "over 4 timed steps" in items[0]["title"], items
    quick = "".join(f"load_data_time: 0.0001, train_step_time: 0.6{i}\n" for i in range(6))
    assert doctor(quick, tmp_path, capsys) == []
