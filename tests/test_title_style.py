"""Every item's title is in sentence case (issue 23's leftovers): its first letter upper-case unless it starts with a
name or key written as its makers write it (`bitsandbytes`, `xFormers'`, `grad_norm`), and no Title Case words in
its head. Walked over the titles the doctor gives on the corpus's dev records (never a sealed one), the test logs,
the advisor's batteries and the scripted runs."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from loratui import events
from loratui.commands.doctor import diagnose, diagnose_stream
from loratui.logic.advisor import Advisor
from loratui.logic.advisor.advice import KEPT_AS_WRITTEN, sentence_case
from tests import scenarios
from tests.test_loss_battery import FLAT, QUIET, RISE
from tests.test_oom_battery import FRAGMENTED_MESSAGES, FULL_MESSAGES, OTHER_PROCESS_MESSAGES
from tests.test_starve_battery import CHINESE, PROSE

DATA = Path(__file__).parent / "data"
NAMES = {"Apple", "Metal", "Python", "Windows", "Intel", "Mac", "Inf", "Slurm", "Linux", "Colab", "Kaggle", "Triton"}
"""Proper names a title's head may hold (`Apple GPU (Metal) out of memory`, `... and this is a Mac`,
`flash-attention's Triton kernel ... for the Triton before 2.0`)."""


def style_problem(title: str) -> str:
    """What is not sentence case in the title ('' when nothing)."""
    first = re.match(r"[^\s:;,()']+", title)
    word = first.group(0) if first else ""
    if re.fullmatch(r"[a-z]+(?:-[a-z]+)*", word) and word not in KEPT_AS_WRITTEN:
        return f"starts lower-case ({word!r})"
    head = title.split(": ")[0]
    titled = [w for w in re.findall(r"[\w'-]+", head)[1:] if re.fullmatch(r"[A-Z][a-z]+", w) and w not in NAMES]
    return f"Title Case words {titled}" if len(titled) >= 2 else ""


def _problems(where: str, items: list[Any]) -> list[str]:
    return [f"{where}: {problem}: {item.title[:100]}" for item in items if (problem := style_problem(item.title))]


def _text(text: str) -> list[Any]:
    return diagnose_stream(io.BytesIO(text.encode()), "paste.txt", guess=True)[0]


def test_dev_records_titles_are_sentence_case(tmp_path: Path) -> None:
    problems, seen = [], 0
    for path in sorted((DATA / "real").glob("*.jsonl")):
        for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            row = json.loads(raw) if raw.strip() else {}
            if not row or row.get("split", "dev") != "dev":
                continue
            excerpt = tmp_path / row["file"]
            excerpt.parent.mkdir(parents=True, exist_ok=True)
            excerpt.write_bytes(row["text"].encode("utf-8"))
            items = diagnose(excerpt, guess=True)[0]
            seen += len(items)
            problems += _problems(f"{path.name}:{number}", items)
            excerpt.unlink()
    assert seen > 500 and problems == [], "\n".join(problems)


def test_test_logs_and_batteries_titles_are_sentence_case() -> None:
    problems = []
    for path in sorted((DATA / "logs").glob("*.txt")):
        problems += _problems(path.name, diagnose(path)[0])
    for number, text in enumerate(FLAT + RISE + QUIET + FULL_MESSAGES + FRAGMENTED_MESSAGES + OTHER_PROCESS_MESSAGES +
                                  PROSE + CHINESE):
        problems += _problems(f"battery #{number}", _text(text))
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("name", ["run", "paused", "paused_by_signal", "failed_oom", "nan_run", "with_save",
                                  "failed_at_start"])
def test_scripted_runs_titles_are_sentence_case(name: str) -> None:
    items = Advisor().feed_all(getattr(scenarios, name)()).items()
    assert _problems(name, items) == []


def test_the_guards_lines_and_a_nan_make_sentence_case_titles() -> None:
    """The guard's title is its latest line, which the supervisor writes lower-case; a NaN's is the key's name."""
    adv = Advisor()
    adv.feed(events.Notice(t=1.0, level="warning", key="guard", message="guard action 1 of 2 (oom: ...)"))
    assert adv.items()[0].title == "Guard action 1 of 2 (oom: ...)"
    adv.feed(events.Notice(t=3.0, level="error", key="guard_verdict", message="crash loop: the same failure"))
    assert adv.items()[0].title == "Crash loop: the same failure"
    assert adv.items()[0].evidence[-1] == "crash loop: the same failure"  # the line itself, as written
    nan = _text("{'loss': 1.2, 'learning_rate': 1e-05, 'epoch': 0.1}\n{'loss': nan, 'learning_rate': 1e-05, "
                "'epoch': 0.2}\n")
    assert nan[0].title.startswith("Loss became nan at step 2"), nan[0].title
    grad = _text("{'loss': 1.2, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.1}\n" * 2)
    assert grad[0].title.startswith("grad_norm became nan"), grad[0].title  # a key, as written


@pytest.mark.parametrize(("title", "cased"), [
    ("loss became nan: lower it", "Loss became nan: lower it"),
    ("gradients became inf", "Gradients became inf"),
    ("guard verdict: recovered", "Guard verdict: recovered"),
    ("bitsandbytes cannot use the GPU", "bitsandbytes cannot use the GPU"),
    ("bitsandbytes' setup failed", "bitsandbytes' setup failed"),
    ("flash-attention cannot be used here", "flash-attention cannot be used here"),
    ("xFormers' attention kernels", "xFormers' attention kernels"),
    ("grad_norm became nan", "grad_norm became nan"),
    ("train/loss became nan", "train/loss became nan"),
    ("fp16 loss scale is at its minimum", "fp16 loss scale is at its minimum"),
    ("pip has no bitsandbytes build", "pip has no bitsandbytes build"),
    ("CUDA out of memory", "CUDA out of memory"),
    ("", ""),
])
def test_sentence_case(title: str, cased: str) -> None:
    assert sentence_case(title) == cased
    assert style_problem(cased) == ""
