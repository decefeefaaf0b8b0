"""The doctor's cost follows what it shows, not how many lines repeat a finding (issue 23's leftovers): a log where
every line is a NaN quotes the first, not every one, and no regex is compiled for each step."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from unittest import mock

import pytest

from loratui.commands.doctor import diagnose_stream
from loratui.logic.advisor import core, phase_words, starve_said
from loratui.logic.advisor.core import Advisor


def _nan_log(lines: int) -> bytes:
    return "".join(f"{{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': {i / 2000:.4f}}}\n"
                   for i in range(1, lines + 1)).encode()


def _quotes(lines: int) -> tuple[int, list[str]]:
    """`_quote` calls on a NaN log of this many lines, and the doctor's evidence."""
    with mock.patch.object(Advisor, "_quote", autospec=True, side_effect=Advisor._quote) as quote:
        items, _ = diagnose_stream(io.BytesIO(_nan_log(lines)), "nan.log")
    return quote.call_count, [line for item in items for line in item.evidence]


def test_a_log_of_nans_quotes_the_kept_finding_not_every_line() -> None:
    few, few_evidence = _quotes(200)
    many, many_evidence = _quotes(2000)
    assert many == few <= 2, (few, many)  # was one call a line: 200 and 2000
    assert few_evidence == many_evidence
    assert "{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.0005}" in few_evidence


@pytest.mark.parametrize(("line", "step", "prints"), [
    ("45/100 [00:10<00:12]", 45, True),
    ("step 45: loss 1.2", 45, True),
    ("step45 loss", 45, True),
    ("epoch 0.45, loss 1.2", 45, False),   # inside a decimal
    ("lr 45.0", 45, False),
    ("45% done", 45, False),               # a percentage
    ("145/200", 45, False),
    ("045/200", 45, False),
    ("450/500", 45, False),
    ("45.", 45, False),
    ("at 45%|, then 45 of 100", 45, True),  # a later whole number counts
    ("0 steps", 0, False),                   # step 0 is no step
    ("", 3, False),
])
def test_prints_step_reads_a_whole_number(line: str, step: int, prints: bool) -> None:
    assert core._prints_step(line, step) is prints
    old = step > 0 and re.search(rf"(?<![\d.]){step}(?![\d.]|%)", line) is not None
    assert prints is old  # the same answer as the regex it replaced


def test_prints_step_compiles_no_regex_per_step() -> None:
    with mock.patch.object(re, "_compile", wraps=re._compile) as compiled:
        for step in range(1, 300):
            core._prints_step(f"{step}/300 [00:01<00:02, loss 1.5]", step)
    assert compiled.call_count == 0  # was one a step (a new pattern each, past re's cache of 512)


OOM_LINE = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "79.15 GiB of which 1.50 GiB is free. Of the allocated memory 70.00 GiB is allocated by PyTorch, and 5.00 GiB "
            "is reserved by PyTorch but unallocated.\n")


class _Counted:
    """A compiled pattern whose finditer and search calls are counted."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern, self.calls = pattern, 0

    def finditer(self, *args: object) -> object:
        self.calls += 1
        return self.pattern.finditer(*args)

    def search(self, *args: object) -> object:
        self.calls += 1
        return self.pattern.search(*args)


def test_a_cuda_oom_message_skips_the_gpu_utilisation_reader() -> None:
    """A CUDA OOM message names the GPU and CUDA, which let the starved-GPU reader run its costliest pattern on every
    such line (a third of a line's reading); it names no utilisation, so that pattern cannot match there."""
    counted = _Counted(starve_said._UTIL_SAID)
    with mock.patch.object(starve_said, "_UTIL_SAID", counted):
        items, _ = diagnose_stream(io.BytesIO((OOM_LINE * 200).encode()), "oom.log")
    assert [item.id for item in items] == ["oom_fragmentation"]
    assert counted.calls == 0  # was 200, one a line


@pytest.mark.parametrize("line", [
    "GPU util is 0-30%", "spiky GPU utilization", "GPU利用率很低", "the GPU sits idle most of the time",
    "my GPU is waiting for data", "Volatile GPU-Util 5%", "the GPUs are starved", "the GPU has nothing to do",
    "the A100 is barely used", "GPU is hardly working", "GPU空闲", "显卡跑不满", "GPU usage low", "low GPU load",
    "SM activity low", "utilisation of the GPU is low", "CUDA usage 10%", "the GPU is underutilised",
])
def test_the_gate_holds_every_word_the_utilisation_pattern_needs(line: str) -> None:
    assert starve_said._UTIL_SAID.search(line), line
    assert starve_said._UTIL_SAID_NEEDS.search(line), line


def test_the_gate_passes_every_dev_line_the_utilisation_pattern_matches() -> None:
    """Over the corpus's dev records (never a sealed one): no line the pattern matches is skipped."""
    missed, matched = [], 0
    for path in sorted((Path(__file__).parent / "data" / "real").glob("*.jsonl")):
        for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            row = json.loads(raw) if raw.strip() else {}
            if row.get("split", "dev") != "dev":
                continue
            for line in row.get("text", "").splitlines():
                if starve_said._UTIL_SAID.search(line):
                    matched += 1
                    if not starve_said._UTIL_SAID_NEEDS.search(line):
                        missed.append(f"{path.name}:{number}")
    assert matched > 20 and missed == []


def test_a_memory_line_that_names_no_phase_finds_no_clauses() -> None:
    """The OOM's phase reader looked for clauses in every memory line twice (the line, then the same line as its
    sentence), though a CUDA OOM message names no phase to weigh them for."""
    with mock.patch.object(phase_words, "clause_starts", wraps=phase_words.clause_starts) as starts:
        diagnose_stream(io.BytesIO((OOM_LINE * 200).encode()), "oom.log")
    assert starts.call_count == 0  # was 400, two a line
    with mock.patch.object(phase_words, "clause_starts", wraps=phase_words.clause_starts) as starts:
        items, _ = diagnose_stream(io.BytesIO(b"It runs out of memory while saving the checkpoint, eval works.\n" +
                                              OOM_LINE.encode()), "oom.log")
    assert starts.call_count >= 1 and items[0].id == "oom_at_save"


def test_the_utilisation_readers_of_a_percentage_skip_a_line_without_one() -> None:
    """The GPU's idle share and its busy share are read as percentages: a line that names the GPU with no `%` (a
    CUDA OOM message) does not run them."""
    idle, busy = _Counted(starve_said._IDLE_SHARE), _Counted(starve_said._BUSY_AT)
    with mock.patch.object(starve_said, "_IDLE_SHARE", idle), mock.patch.object(starve_said, "_BUSY_AT", busy):
        diagnose_stream(io.BytesIO((OOM_LINE * 200).encode()), "oom.log")
        assert idle.calls == busy.calls == 0  # were 200 each
        assert starve_said._util_said("nvidia-smi shows the GPU at 7% most of the time") == {
            "said": "util", "quote": "nvidia-smi shows the GPU at 7% most of the time", "util": 7}
        assert starve_said._util_said("the GPU idle 63% of the time")["util"] == 37  # type: ignore[index]
    assert idle.calls and busy.calls
