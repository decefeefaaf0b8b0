"""Issue 23: the doctor reads the same text the same way however it was pasted. A fixed set of dev records, each under
every wrapping of `bench/corpus_dialects.py` (a launcher's, logger's, container runtime's or forum's), gives the first
item it gives unwrapped; the bench measures every dev record, this keeps a few (chosen, by file name, among those a
wrapping changed before `text_reader/dialect.py`: a checkpoint killed while saving, an eval OOM, a NaN column, a
starved loader, a diverging loss, a setup failure). Dev records only: a sealed record is never wrapped or read."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from corpus_dialects import WRAPPINGS  # noqa: E402
from test_corpus import ROWS, split_of  # noqa: E402

from loratui.commands.doctor import diagnose  # noqa: E402

KEPT = (
    "oom_at_save/colossalai_sd2_second_epoch_ckpt_killed.txt",
    "oom_full/rocm_w7900_qlora_jupyter_hip_oom.txt",
    "oom_at_eval/reid_baseline_test_py_batch64.txt",
    "oom_at_eval/opennmt_oom_end_of_first_epoch_validation.txt",
    "bnb_setup/llama_int8_bnb_cuda_setup_nameerror_compute_capability_below_75.txt",
    "oom_fragmentation/dlas_tortoise_finetune_2gib_cached_0_free.txt",
    "loss_diverging/fastai_transformerxl_train_loss_2_7_to_6_2_epoch2.txt",
    "data_starved/cubicasa5k_colab_load_batch_0_74_of_0_91s.txt",
    "nan_loss/yanmtt_bart_pretrain_fp16_nan_at_76980.txt",
    "loss_flat_or_zero/coupletai_epochs200_loss_stays_near_5.txt",
)
DEV = {row["file"]: row for row in ROWS if split_of(row) == "dev"}


def first_item(text: str, path: Path) -> str:
    """The id of the doctor's first item (the rules alone: the word model's guess reads a fence's sentence as words
    of the text, which they are) for this text written under the record's own name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    items, _ = diagnose(path, guess=False)
    return items[0].id if items else ""


def test_the_kept_records_are_dev_records() -> None:
    assert [name for name in KEPT if name not in DEV] == []


@pytest.mark.parametrize("name", KEPT)
def test_every_wrapping_keeps_the_first_item(name: str, tmp_path: Path) -> None:
    text = DEV[name]["text"]
    plain = first_item(text, tmp_path / "plain" / name)
    changed = {wrap: got for wrap, wrapper in WRAPPINGS.items()
               if (got := first_item(wrapper(text), tmp_path / wrap / name)) != plain}
    assert changed == {}, f"unwrapped: {plain}"


IMPORTED = "nan_loss/llamafactory_llama2_lr5e-2_loss_zero_gradnorm_nan.txt"
"""A dev training log (`import` reads its steps and last loss): under a line prefix or a block indent its logger's
copies of the Trainer's dicts were once counted as records of their own (7 records for 4)."""


def train_logs(text: str, path: Path) -> list[tuple[int, str]]:
    from loratui.sources import importers

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return [(e.step, str(e.values["loss"])) for e in importers.import_path(path)
            if type(e).__name__ == "Log" and "loss" in e.values]


def test_every_wrapping_keeps_what_import_reads(tmp_path: Path) -> None:
    text = DEV[IMPORTED]["text"]
    plain = train_logs(text, tmp_path / "plain" / IMPORTED)
    assert len(plain) >= 4
    changed = [wrap for wrap, wrapper in WRAPPINGS.items()
               if train_logs(wrapper(text), tmp_path / wrap / IMPORTED) != plain]
    assert changed == []
