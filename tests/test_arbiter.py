"""The arbiter between the rules' answer and the words (loratui/logic/arbiter.py; issue 23): its arithmetic against
its arrays, where its answer goes (first, as a guess; healthy only over warnings, which stay as notes), and where it
learned (held-out dev records only), and where numbers the rules judged outrank it. The figures are
bench/arbiter_held_out.py's and docs/learned_fallback.md's."""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from loratui.logic import arbiter
from loratui.logic.advisor.advice import ERROR, INFO, WARNING, Advice
from loratui.logic.advisor.oom_advice import UNSETTLED
from loratui.logic.categories import answer_category
from loratui.logic.word_guess import Reading
from loratui.sources import word_model
from tests.test_corpus import ROWS, split_of

BEFORE = Path(__file__).resolve().parents[1] / "bench" / "results" / "rules_before_wave.jsonl.gz"
LOSS_FLAT = Advice(id="loss_flat", severity=WARNING, title="Loss does not move", evidence=[], change={}, step=0)
OOM = Advice(id="oom_full", severity=ERROR, title="CUDA out of memory", evidence=[], change={}, step=0)
OOM_UNSETTLED = replace(OOM, title=f"CUDA out of memory ({UNSETTLED[0]})")
FRAGMENTED = Advice(id="oom_fragmentation", severity=ERROR, title="CUDA out of memory from fragmentation",
                    evidence=[], change={}, step=0)


@pytest.fixture(scope="module")
def shipped() -> arbiter.Arbiter:
    found = word_model.load_arbiter()
    assert found is not None, f"{word_model.ARBITER} is missing or unreadable: run bench/arbiter_held_out.py --write"
    return found


def reading(kinds: tuple[str, ...], top: str, p: float = 0.9) -> Reading:
    rest = (1 - p) / (len(kinds) - 1)
    return Reading(p_problem=0.95, kinds={kind: p if kind == top else rest for kind in kinds})


def steered(found: arbiter.Arbiter, kind: str, p: float) -> arbiter.Arbiter:
    """The shipped arbiter with its weights cleared and its intercepts set so that it answers `kind` at `p`."""
    scores = np.full(len(found.kinds), math.log((1 - p) / (len(found.kinds) - 1)))
    scores[found.kinds.index(kind)] = math.log(p)
    return replace(found, coef=np.zeros_like(found.coef), intercept=scores)


def test_the_answer_is_the_softmax_of_its_scores(shipped: arbiter.Arbiter) -> None:
    read = reading(shipped.kinds, "oom_other_process")
    x = arbiter.features(shipped.kinds, "oom_full", read)
    assert x.shape == (shipped.coef.shape[1],)
    scores = shipped.intercept + shipped.coef @ x
    p = np.exp(scores - scores.max())
    kind, share = arbiter.answer(shipped, "oom_full", read)
    assert kind == shipped.kinds[int(scores.argmax())] and share == pytest.approx(float(p.max() / p.sum()))


def test_its_kinds_are_the_word_models(shipped: arbiter.Arbiter) -> None:
    model = word_model.load()
    assert model is not None and shipped.kinds == model.kinds and 0.3 <= shipped.at < 1


def test_its_answer_goes_first_at_its_threshold_and_the_rules_items_stay(shipped: arbiter.Arbiter) -> None:
    read = reading(shipped.kinds, "data_starved")
    items = arbiter.arbitrated(steered(shipped, "data_starved", shipped.at + 0.02), [OOM], [OOM], read)
    assert answer_category(items) == "data_starved" and items[1:] == [OOM]
    assert items[0].severity == WARNING and "a guess" in items[0].title and "oom_full" in items[0].evidence[0]
    below = steered(shipped, "data_starved", shipped.at - 0.02)
    assert arbiter.arbitrated(below, [OOM], [OOM], read) == [OOM]
    same = steered(shipped, "oom_full", 0.99)  # it agrees: nothing added
    assert arbiter.arbitrated(same, [OOM], [OOM], read) == [OOM]


def test_healthy_only_over_warnings_which_are_kept_as_notes(shipped: arbiter.Arbiter) -> None:
    read = reading(shipped.kinds, "healthy")
    calm = steered(shipped, "healthy", 0.95)
    items = arbiter.arbitrated(calm, [LOSS_FLAT], [LOSS_FLAT], read)
    assert answer_category(items) == "healthy" and items[0].severity == INFO
    assert items[1] == replace(LOSS_FLAT, severity=INFO)  # the finding, kept
    assert arbiter.arbitrated(calm, [OOM, LOSS_FLAT], [OOM, LOSS_FLAT], read) == [OOM, LOSS_FLAT]


def test_the_doctor_asks_it_with_the_rules_answer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                  shipped: arbiter.Arbiter) -> None:
    from loratui.commands import doctor

    asked: list[str] = []
    real = arbiter.answer
    monkeypatch.setattr(arbiter, "answer", lambda found, rules, read: asked.append(rules) or real(found, rules, read))
    paste = tmp_path / "oom.txt"
    paste.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                     "capacity of 23.65 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process "
                     "has 22.61 GiB memory in use.\n", encoding="utf-8")
    doctor.diagnose(paste, guess=True)
    assert asked == ["oom_full"]
    monkeypatch.setattr(word_model, "load_arbiter", lambda: None)  # no arbiter: the rules' and the guess's answer
    assert answer_category(doctor.diagnose(paste, guess=True)[0]) == "oom_full"


def test_it_learned_from_held_out_dev_records_only(shipped: arbiter.Arbiter) -> None:
    """Its rows are bench/results/rules_before_wave.jsonl.gz's, each a dev record of the corpus (the word model's
    readings of them came from models trained without their wave): no sealed excerpt taught it anything. The file
    grows by a wave's rows when a wave is merged; the arbiter learned from the rows it held then."""
    rows = [json.loads(line) for line in gzip.decompress(BEFORE.read_bytes()).decode().splitlines() if line]
    split = {row["file"]: split_of(row) for row in ROWS}
    kept = [row for row in rows if row["file"] in split]
    assert {split[row["file"]] for row in kept} == {"dev"}
    assert 0 < shipped.rows <= len(kept)


def test_numbers_the_rules_judged_outrank_it(shipped: arbiter.Arbiter) -> None:
    """A series the rules read and called fine stays fine; an OOM whose numbers settled its kind keeps it against
    another memory kind (not against a phase); where nothing settled the kind, the arbiter may name it."""
    loss = steered(shipped, "loss_flat_or_zero", 0.99)
    read = reading(shipped.kinds, "loss_flat_or_zero")
    assert arbiter.arbitrated(loss, [], [], read, series=True) == []
    assert answer_category(arbiter.arbitrated(loss, [], [], read)) == "loss_flat_or_zero"  # prose: it may speak
    full = steered(shipped, "oom_full", 0.99)
    assert arbiter.arbitrated(full, [FRAGMENTED], [FRAGMENTED], read) == [FRAGMENTED]
    at_eval = steered(shipped, "oom_at_eval", 0.99)
    assert answer_category(arbiter.arbitrated(at_eval, [FRAGMENTED], [FRAGMENTED], read)) == "oom_at_eval"
    neighbour = steered(shipped, "oom_other_process", 0.99)
    assert arbiter.arbitrated(neighbour, [OOM], [OOM], read) == [OOM]
    found = arbiter.arbitrated(neighbour, [OOM_UNSETTLED], [OOM_UNSETTLED], read)
    assert answer_category(found) == "oom_other_process" and found[1:] == [OOM_UNSETTLED]


def test_an_exception_read_from_its_own_line_outranks_it(shipped: arbiter.Arbiter) -> None:
    """An exception whose printed line the rules read (its type and message) stays the answer; one only named in
    words, or a traceback cut before its line, may still be weighed against the words."""
    import io

    from loratui.commands.doctor import diagnose_stream
    from loratui.logic.advisor.failure import read_raised

    def items(text: str) -> list[Advice]:
        return diagnose_stream(io.BytesIO(text.encode()), "pasted")[0]

    raised = items("RuntimeError: Distributed package doesn't have NCCL built in\n")
    named = items("I get a KeyError when the trainer starts and nothing else\n")
    assert raised[0].id == "exception" and read_raised(raised[0])
    assert named and named[0].id == "exception" and not read_raised(named[0])
    hang = steered(shipped, "nccl_timeout", 0.99)
    read = reading(shipped.kinds, "nccl_timeout")
    assert arbiter.arbitrated(hang, raised, raised, read) == raised
    assert answer_category(arbiter.arbitrated(hang, named, named, read)) == "nccl_timeout"


def test_a_cuda_error_the_rules_read_is_no_plain_exception(shipped: arbiter.Arbiter) -> None:
    """G1 (twenty-fifth session): a CUDA error the rules read (a library's status, a build without kernels for this
    card) is not made a plain exception because its traceback's words read like one; another kind may still speak."""
    import io

    from loratui.commands.doctor import diagnose_stream

    rules = diagnose_stream(io.BytesIO(b"RuntimeError: cuFFT error: CUFFT_INTERNAL_ERROR\n"), "pasted", guess=False)[0]
    assert rules[0].id == "cuda_error"
    plain = steered(shipped, "exception_other", 0.99)
    assert arbiter.arbitrated(plain, rules, rules, reading(shipped.kinds, "exception_other")) == rules
    hang = steered(shipped, "nccl_timeout", 0.99)
    assert answer_category(arbiter.arbitrated(hang, rules, rules, reading(shipped.kinds, "nccl_timeout"))) == \
        "nccl_timeout"


def test_the_hosts_ram_the_rules_read_is_no_card_memory_kind(shipped: arbiter.Arbiter) -> None:
    """G6 (thirtieth session): the host's RAM the rules read from the kernel's kill is not made one of the card's
    memory kinds because the words tell of memory; a kind that is no memory kind may still speak."""
    import io

    from loratui.commands.doctor import diagnose_stream
    from loratui.logic.advisor.oom_advice import host_memory

    text = b"Epoch 3 ... the data is about 40 GB\n[ 8123.4] Out of memory: Killed process 4242 (python) total-vm:9G\n"
    rules = diagnose_stream(io.BytesIO(text), "pasted", guess=False)[0]
    assert host_memory(rules[0])
    for kind in ("oom_full", "oom_other_process", "oom_at_eval"):
        assert arbiter.arbitrated(steered(shipped, kind, 0.99), rules, rules, reading(shipped.kinds, kind)) == rules
    starved = steered(shipped, "data_starved", 0.99)
    assert answer_category(arbiter.arbitrated(starved, rules, rules, reading(shipped.kinds, "data_starved"))) == \
        "data_starved"
