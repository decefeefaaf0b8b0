"""Issue 23: an exception's line written straight after Chinese words (`训练报错ValueError: ...`). Python's `\\w`
counts a Chinese character as a word's letter, so a look-behind for `\\w` took the type for the tail of a longer
word and the exception went unread. The dev line is quoted with its source; the others are our own wordings."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream
from loratui.logic.tracebacks import TraceScanner


def first(text: str) -> tuple[str, str]:
    items = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")[0]
    return (items[0].id, items[0].title) if items else ("", "")


@pytest.mark.parametrize("line, kind", [
    # https://github.com/hiyouga/LlamaFactory/issues/43
    ("训练报错ValueError: Target modules ['q_proj', 'v_proj'] not found in the base model. Please check the target "
     "modules and try again.", "ValueError"),
    ("运行的时候出现KeyError: 'labels'", "KeyError"),
    ("加载模型时抛出了OSError: Can't load tokenizer for '/data/models/qwen-7b'.", "OSError"),
    ("推理时直接torch.cuda.OutOfMemoryError: CUDA out of memory.", "torch.cuda.OutOfMemoryError"),
])
def test_an_exception_right_after_chinese_words_is_read(line: str, kind: str) -> None:
    """Mechanism: Chinese runs into the type with no space; the type's start is where ASCII letters begin."""
    scanner = TraceScanner()
    scanner.line(line)
    assert scanner.first is not None and scanner.first.type == kind


def test_the_chinese_threads_error_gets_its_step() -> None:
    found, title = first("训练报错ValueError: Target modules ['q_proj', 'v_proj'] not found in the base model.")
    assert found == "exception" and "target_modules" in title


@pytest.mark.parametrize("line", [
    "我遇到了RuntimeError的问题，怎么办",  # the type named in a sentence, no message after it
    "see myValueError: a name that only ends in a type's",  # an ASCII word's tail stays no type
])
def test_a_type_inside_a_word_or_sentence_is_no_exception(line: str) -> None:
    scanner = TraceScanner()
    scanner.line(line)
    assert scanner.first is None
