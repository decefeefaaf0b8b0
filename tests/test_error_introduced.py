"""Issue 23: the person says an error came and pastes its message below, a message with no exception type in it (the
program's own sentence): the run failed on it, with no traceback to read. The dev lines are quoted with their source;
the others are our own wordings; warnings, commands and errors said to be gone or supposed are none."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream


def first(text: str) -> tuple[str, str]:
    items = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")[0]
    return (items[0].id, items[0].title) if items else ("", "")


@pytest.mark.parametrize("text, quoted", [
    # https://github.com/nlp-with-transformers/notebooks/issues/133
    ("section, and got an error complaining about no loss in the outputs:\n```\nThe model did not return a loss from the "
     "inputs, only the following keys: logits. For reference, the inputs it received are input_ids,attention_mask.\n```",
     "The model did not return a loss"),
    ("When I call trainer.train() I get this error:\n```\nExpected input batch_size (16) to match target batch_size (8).\n"
     "```", "Expected input batch_size"),
    ("Running the script I got the following error message:\nCan't find a valid checkpoint at ./out",
     "Can't find a valid checkpoint"),
    ("The evaluation step throws an exception:\nlabels must be a list of ints", "labels must be a list of ints"),
])
def test_an_error_introduced_then_its_message(text: str, quoted: str) -> None:
    """Mechanism: a sentence that says an error came and ends by introducing it (`I get this error:`), then the
    program's message on the next line: the run failed on that message."""
    found, title = first(text)
    assert found == "exception" and quoted in title


@pytest.mark.parametrize("text", [
    "I got an error:\nUserWarning: the tokenizer has no pad token",  # a warning
    "I got an error:\n$ python train.py --lr 1e-4",  # a command
    "I no longer get the error:\nExpected input batch_size (16) to match target batch_size (8).",  # gone
    "If you get an error like this:\nExpected input batch_size (16) to match target batch_size (8).",  # supposed
])
def test_warnings_commands_and_errors_gone_are_no_failure(text: str) -> None:
    assert first(text)[0] != "exception"
