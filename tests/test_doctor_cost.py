"""The doctor's cost follows what it shows, not how many lines repeat a finding (issue 23's leftovers): a log where
every line is a NaN quotes the first, not every one, and no regex is compiled for each step."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from unittest import mock

import pytest

from loratui.commands.doctor import diagnose_stream
from loratui.logic import oom
from loratui.logic.advisor import (
    core,
    error_said,
    oom_fold,
    phase_words,
    starve,
    starve_output,
    starve_said,
    text,
)
from loratui.logic.advisor.core import Advisor
from loratui.logic.word_gate import WordGate


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
    assert starve_said._UTIL_SAID_NEEDS.passes(line), line


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
                    if not starve_said._UTIL_SAID_NEEDS.passes(line):
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


def _healthy_log(lines: int) -> bytes:
    out = []
    for i in range(1, lines + 1):
        out.append(f"{{'loss': {2.0 - i / lines:.4f}, 'grad_norm': 1.1, 'learning_rate': 2e-05, "
                   f"'epoch': {i / lines:.4f}}}")
        if i % 10 == 0:
            out.append(f" {i // 10}%|██▌       | {i}/{lines} [01:02<10:00,  1.50it/s]")
    return ("\n".join(out) + "\n").encode()


@pytest.mark.parametrize("log", [_healthy_log(200), _nan_log(200)], ids=["healthy", "nan"])
def test_a_printed_log_skips_the_diffusion_and_host_ram_patterns(log: bytes) -> None:
    """core's diffusion pattern and the host-RAM pattern ran on every line (until one matched): printed Trainer dicts
    and progress bars hold none of the words either needs."""
    diffusion, host = _Counted(core._DIFFUSION), _Counted(oom_fold._HOST_RAM)
    with mock.patch.object(core, "_DIFFUSION", diffusion), mock.patch.object(oom_fold, "_HOST_RAM", host):
        diagnose_stream(io.BytesIO(log), "train.log")
    assert diffusion.calls == host.calls == 0  # were 220 each on the healthy log (bars too), 200 on the NaN log


def test_the_diffusion_and_host_ram_patterns_still_read_their_lines() -> None:
    log = ("I fine-tune SDXL with kohya's sd-scripts and the loss stays flat.\n"
           "Then the process was killed: exit code 137\n")
    diffusion, host = _Counted(core._DIFFUSION), _Counted(oom_fold._HOST_RAM)
    with mock.patch.object(core, "_DIFFUSION", diffusion), mock.patch.object(oom_fold, "_HOST_RAM", host):
        advisor = Advisor(None)
        for line in log.splitlines():
            advisor._line(line)
    assert advisor.diffusion and advisor.host_oom is not None
    assert diffusion.calls == 1 and host.calls == 1  # the first line names no host RAM: skipped


def test_a_cuda_oom_message_skips_the_patterns_of_a_persons_words() -> None:
    """A person's words that an error came (`I get a KeyError`, `I got the following error:`) need a verb before it;
    the worries read beside a loss (results said good, is this normal, the lr rising) need their nouns, a Mac named
    its name: a CUDA OOM message holds none of them, and ran all six on every line."""
    patterns = {(module, name): _Counted(getattr(module, name)) for module, name in [
        (error_said, "_SAID"), (error_said, "_UNTYPED"), (core, "_RESULTS_GOOD"), (core, "ASKS_NORMAL"),
        (core, "_LR_RISES"), (text, "MAC_SAID")]}
    with contextlib.ExitStack() as stack:
        for (module, name), counted in patterns.items():
            stack.enter_context(mock.patch.object(module, name, counted))
        items, _ = diagnose_stream(io.BytesIO((OOM_LINE * 200).encode()), "oom.log")
    assert [item.id for item in items] == ["oom_fragmentation"]
    assert [counted.calls for counted in patterns.values()] == [0] * 6  # were 200 each


def test_later_oom_messages_are_not_parsed_again() -> None:
    """Each rank's message, or the same one repeated: once an OOM with its numbers and kind is kept, a later message
    replaces nothing, so its nine sizes are not read again (parse_oom ran on every one)."""
    with mock.patch.object(oom, "parse_oom", wraps=oom.parse_oom) as parsed:
        items, _ = diagnose_stream(io.BytesIO((OOM_LINE * 200).encode()), "oom.log")
    assert [item.id for item in items] == ["oom_fragmentation"]
    assert parsed.call_count == 1  # was 200


def test_a_later_oom_message_still_tells_where_the_first_struck() -> None:
    later = OOM_LINE.replace("torch.cuda", "model.state_dict(): torch.cuda")
    with mock.patch.object(oom, "parse_oom", wraps=oom.parse_oom) as parsed:
        items, _ = diagnose_stream(io.BytesIO((OOM_LINE * 3 + later).encode()), "oom.log")
    assert parsed.call_count == 1
    assert items[0].id == "oom_at_save"
    # a first message without its numbers is replaced by a later one with them, so it is read until one comes
    with mock.patch.object(oom, "parse_oom", wraps=oom.parse_oom) as parsed:
        log = b"RuntimeError: CUDA out of memory.\n" + OOM_LINE.encode() * 3
        items, _ = diagnose_stream(io.BytesIO(log), "oom.log")
    assert parsed.call_count == 2 and items[0].id == "oom_fragmentation"


@pytest.mark.parametrize(("gate", "pattern", "line"), [
    *[(core._DIFFUSION_NEEDS, core._DIFFUSION, line) for line in [
        "Stable Diffusion fine-tune", "a diffusion model", "Diffusion_loss", "latent diffusion",
        "pip install diffusers", "text-to-image", "DreamBooth", "textual_inversion", "DDPM sampler", "ddim",
        "noise_pred = unet(x)",
        "sd-scripts", "Kohya_ss", "SDXL", "SD 1.5", "SD3.5"]],
    *[(oom_fold._HOST_RAM_NEEDS, oom_fold._HOST_RAM, line) for line in [
        "DefaultCPUAllocator: not enough memory", "OSError: [Errno 12] Cannot allocate memory", "MemoryError",
        "Killed", "died with <Signals.SIGKILL: 9>", "exitcode  : -9", "exited with code 137", "oom-killer",
        "memory error", "out of RAM", "RAM is full", "内存不足", "The paging file is too small",
        "crashed after using all available RAM", "The Kernel crashed while executing code",
        "the kernel appears to have died", "进程被kill", "OOM了被系统杀掉",
        "killed by the system", "the RAM fills up", "it eats all my RAM", "it needs more memory than my machine has",
        "the job got killed", "not enough system RAM", "超出了内存", "内存不够", "kİlled by the OS"]],
    *[(error_said._VERB_NEEDS, error_said._SAID, line) for line in [
        "I get a KeyError", "it gets the ValueError", "got a key error", "getting TypeError", "throws IndexError",
        "threw a NameError", "is thrown ImportError", "throwing an AssertionError", "raises a KeyError",
        "raised TypeError", "raising ValueError", "hits a KeyError", "hitting an IndexError",
        "encountered a weird KeyError", "I receive an AttributeError", "received FileNotFoundError",
        "I run into a KeyError", "ran into the ValueError", "running into TypeError", "it fails with a KeyError",
        "crashed with ValueError", "dies with TypeError", "stopped with IndexError", "ends up with a KeyError",
        "ended with ZeroDivisionError", "gives a KeyError", "gave TypeError", "giving a value error",
        "it GOT A KEYERROR"]],
    *[(error_said._VERB_NEEDS, error_said._UNTYPED, line) for line in [
        "I get the following error:", "and got an error complaining about no loss in the outputs:",
        "it throws some exception：", "ran into this error: ```python"]],
    *[(core._RESULTS_GOOD_NEEDS, core._RESULTS_GOOD, line) for line in [
        "the results kept improving", "outputs look good", "samples are great", "generations seem fine",
        "the images looked better", "predictions are getting better", "效果很好"]],
    *[(core._ASKS_NORMAL_NEEDS, core.ASKS_NORMAL, line) for line in [
        "Is this normal?", "are these expected", "is it really normal", "is the loss supposed to", "这正常吗"]],
    *[(core._LR_RISES_NEEDS, core._LR_RISES, line) for line in [
        "the end of warmup", "warm-up", "预热", "lr and loss increase", "learning rate goes up"]],
    *[(text._MAC_NEEDS, text.MAC_SAID, line) for line in [
        "on macOS 14", "MACOSX", "my MacBook", "Mac Studio", "mac mini", "iMac", "Apple Silicon", "Apple M2",
        "M3 Max", "M1 mac", "torch.backends.mps", "device = 'mps'", "the MPS backend", '"mps"',
        "/opt/homebrew/bin/python"]],
])
def test_a_gate_holds_every_word_its_pattern_needs(gate: WordGate, pattern: re.Pattern[str], line: str) -> None:
    assert pattern.search(line), line
    assert gate.passes(line), line


def test_a_gate_reads_case_as_the_pattern_does() -> None:
    """re.I takes the dotted and dotless i (İ, ı) and the Kelvin sign for i and k; str.lower does not: a line that is
    not ASCII is read with the gate's own case-insensitive pattern."""
    gate = WordGate("kill", "memory")
    for line in ["KİLL", "kıll", "\u212aill", "MEMORY", "no", "ок", "memoRY ок"]:
        assert gate.passes(line) is bool(re.search("kill|memory", line, re.IGNORECASE)), line


def _dev_lines() -> list[tuple[str, str]]:
    """(where, line) for every line of the corpus's dev records (never a sealed one)."""
    found = []
    for path in sorted((Path(__file__).parent / "data" / "real").glob("*.jsonl")):
        for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            row = json.loads(raw) if raw.strip() else {}
            if row.get("split", "dev") != "dev":
                continue
            found.extend((f"{path.name}:{number}", line) for line in row.get("text", "").splitlines())
    return found


def test_the_gates_pass_every_dev_line_their_patterns_match() -> None:
    lines = _dev_lines()
    for gate, pattern, least in [(core._DIFFUSION_NEEDS, core._DIFFUSION, 10),
                                 (oom_fold._HOST_RAM_NEEDS, oom_fold._HOST_RAM, 50),
                                 (starve._ITERATION_NEEDS, starve._ITERATION, 100),
                                 (error_said._VERB_NEEDS, error_said._SAID, 3),
                                 (error_said._VERB_NEEDS, error_said._UNTYPED, 10),
                                 (core._RESULTS_GOOD_NEEDS, core._RESULTS_GOOD, 2),
                                 (core._ASKS_NORMAL_NEEDS, core.ASKS_NORMAL, 10),
                                 (core._LR_RISES_NEEDS, core._LR_RISES, 5),
                                 (text._MAC_NEEDS, text.MAC_SAID, 5)]:
        matched = [(where, line) for where, line in lines if pattern.search(line[:4000])]
        assert len(matched) >= least and [where for where, line in matched if not gate.passes(line[:4000])] == []


def test_a_printed_dict_skips_the_iteration_pattern() -> None:
    """The starved-data watch read every line for a logged iteration (to know what a following line comes after):
    a printed Trainer dict holds neither a `/` nor an iteration's name, a progress bar still is one."""
    counted = _Counted(starve._ITERATION)
    with mock.patch.object(starve, "_ITERATION", counted):
        diagnose_stream(io.BytesIO(_healthy_log(200)), "train.log")
    assert counted.calls == 20  # the bars only; was 220, every line
    assert starve._ITERATION_NEEDS.passes(" 1%|██▌       | 10/200 [01:02<10:00,  1.50it/s]")


_OLD_GATES = {
    "PROFILE_WORDS": re.compile(r"Percentage|next|collate|fetch|DataLoader|getitem|function calls|% Time|loader",
                                re.IGNORECASE),
    "_UTIL_SAID_NEEDS": re.compile(r"util|usage|load|activity|busy|used|working|starv|nothing|idl|wait|利用率|使用率|"
                                   r"占用率|空闲|闲置|在等|等待数据|等数据|跑不满|跑满", re.IGNORECASE),
}
"""The two gates as the patterns they were (5-40 us a line where nothing matched: the whole line tried against each
word case-insensitively); now WordGates that lower an ASCII line and look for the words."""


def test_the_word_gates_search_no_ascii_line_with_a_pattern() -> None:
    gates = [starve_output.PROFILE_WORDS, starve_said._UTIL_SAID_NEEDS, starve._ITERATION_NEEDS, core._DIFFUSION_NEEDS,
             oom_fold._HOST_RAM_NEEDS]
    counted = [_Counted(gate._pattern) for gate in gates]  # PROFILE_WORDS and _UTIL_SAID_NEEDS had none: patterns
    with contextlib.ExitStack() as stack:
        for gate, count in zip(gates, counted, strict=True):
            stack.enter_context(mock.patch.object(gate, "_pattern", count))
        diagnose_stream(io.BytesIO((OOM_LINE * 200).encode() + _nan_log(200)), "oom.log")
    assert [count.calls for count in counted] == [0] * len(gates)


def test_the_word_gates_answer_as_the_patterns_they_replaced_on_every_dev_line() -> None:
    lines = [line[:4000] for _, line in _dev_lines()] + [OOM_LINE, "KİLL the loader", "GPU ıdle", "\u212aernel"]
    for name, gate in [("PROFILE_WORDS", starve_output.PROFILE_WORDS),
                       ("_UTIL_SAID_NEEDS", starve_said._UTIL_SAID_NEEDS)]:
        differ = [line for line in lines if gate.passes(line) is not bool(_OLD_GATES[name].search(line))]
        assert differ == [], (name, differ[:3])
