"""Issue 26 item 11: the small message defects a newcomer met, each checked where the user reads it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loratui import events
from loratui.cli import main
from loratui.logic import datafile
from loratui.logic import fmt
from loratui.recipe import Recipe
from loratui.supervisor.watch import RunWatch

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "23.64 GiB of which 1.12 GiB is free. Including non-PyTorch memory, this process has 22.51 GiB memory in "
       "use. Of the allocated memory 21.80 GiB is allocated by PyTorch, and 310.25 MiB is reserved by PyTorch "
       "but unallocated. If reserved but unallocated memory is large try setting "
       "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")


def test_estimate_on_a_card_below_the_warning_line_says_the_card_decides(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "tiny", "--gpu-gb", "24"]) == 0
    out = capsys.readouterr().out
    assert "on a 24 GiB card, warning line 30 GiB is above the card, so the card decides" in out
    assert "warning line 30 GiB:" not in out


def test_estimate_labels_float32_weights_and_says_an_8(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "tiny", "--gpu-gb", "8"]) == 0
    out = capsys.readouterr().out
    assert "base weights (fp32)" in out and "16-bit" not in out  # tiny loads in float32
    assert "on an 8 GiB card" in out
    assert [fmt.article(n) for n in ("8", "11", "18", "80", "24", "16", "1")] == ["an"] * 4 + ["a"] * 3


def test_doctor_counts_one_line_in_the_singular(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "one.log"
    log.write_text("{'loss': 1.5, 'grad_norm': 1.0, 'learning_rate': 2e-4}\n")
    main(["doctor", str(log)])
    out = capsys.readouterr().out
    assert "1 line read" in out and "1 lines" not in out


def test_a_jsonl_line_cut_short_is_reported_at_its_own_column() -> None:
    line = b'{"instruction": "Reverse the word", "output": "a"\n'  # the closing brace is missing
    with pytest.raises(datafile.DataFileError) as caught:
        list(datafile.iter_rows([line], ".jsonl"))
    assert caught.value.line == 1 and f"at column {len(line)}" in caught.value.message  # was column 1


def test_quoted_evidence_is_cut_at_a_word_with_an_ellipsis(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "oom.log"
    log.write_text(f"Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n{OOM}\n")
    main(["doctor", str(log), "--json"])
    items = json.loads(capsys.readouterr().out)
    quoted = [line for item in items for line in item["evidence"] if line.startswith("torch.OutOfMemoryError")]
    assert quoted and all(len(line) <= 240 for line in quoted)
    for line in quoted:
        if len(line) < len(OOM):
            assert line.endswith("…") and OOM.startswith(line[:-1]) and OOM[len(line) - 1] == " "
    assert fmt.clip("a b c", 5) == "a b c" and fmt.clip("alpha beta gamma", 12) == "alpha beta…"


def test_the_oom_notice_says_cuda_out_of_memory_once() -> None:
    written: list[Any] = []
    watch = RunWatch("r1", Recipe(), written.append)
    watch.feed([events.Step(t=1.0, step=1, epoch=0.0, step_time=0.1),
                events.Output(t=2.0, stream="stderr", lines=[OOM])])
    notices = [e.message for e in written if isinstance(e, events.Notice) and e.key == "alert"]
    assert notices, written
    assert all("CUDA out of memory: CUDA out of memory" not in m for m in notices), notices


def test_cpu_boxes_are_not_told_about_a_gpu() -> None:
    """A newcomer trial on a CPU box read "on one GPU the two compete" and "GPU freed": there was no GPU.
    Both say so only where a GPU was found."""
    from loratui import runstatus
    from loratui.cli import sharing_note
    from loratui.supervisor.watch import RunWatch

    cpu = runstatus.Status(state="training", gpu=False)
    gpu = runstatus.Status(state="training", gpu=True, peak_used=5 << 30)
    assert "share this machine" in sharing_note("r1", cpu) and "GPU" not in sharing_note("r1", cpu)
    assert "5.0 GiB of GPU memory" in sharing_note("r2", gpu) and "compete" in sharing_note("r2", gpu)
    for sample, said in ((None, "memory freed"), (events.Sample(t=1.5, gpu=0, used_max=1 << 30, used_last=1 << 30, used_min=1 << 30, total=80 << 30), "GPU freed")):
        written: list[Any] = []
        watch = RunWatch("r1", Recipe(), written.append)
        watch.feed(([sample] if sample is not None else []) + [events.State(t=2.0, state=events.SUSPENDED)])
        notices = [e.message for e in written if isinstance(e, events.Notice)]
        assert len(notices) == 1 and said in notices[0], notices


@pytest.mark.parametrize(("row", "shown"), [
    ({"instruction": "Add 2 and 3", "output": None}, "'output' is null"),
    ({"instruction": ["a", "b"], "output": "x"}, "'instruction' is a JSON list"),
])
def test_an_example_whose_field_is_null_or_a_structure_is_refused(row: dict[str, Any], shown: str) -> None:
    """`{"instruction": ..., "output": null}` (a spreadsheet's empty cell exported to JSON) passed the data check
    and trained as the text "None"; it is now refused at its line, as a missing field is."""
    from loratui.recipe import DataSection
    data = DataSection(path="d.jsonl", format="instruction")
    with pytest.raises(datafile.DataFileError) as caught:
        datafile.check_row(row, data, 6)
    assert caught.value.line == 6 and shown in caught.value.message and "not text" in caught.value.message
    datafile.check_row({"instruction": "Add 2 and 3", "output": 5}, data, 7)  # a number is text enough
