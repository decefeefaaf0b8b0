"""Issue 23: an exception named in the person's words, with no traceback in the text, is the run's failure (the
way a maintainer reads `I get a key error from the data collator`), not a healthy run. Not a memory, CUDA or NCCL
error (their readers own them), not one that is gone or only supposed, not a bare `an error`, and never over a
traceback the text holds."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream
from loratui.logic.advisor.error_said import said_raised


def first(text: str):
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return items[0] if items else None


@pytest.mark.parametrize(("line", "kind"), [
    # https://github.com/huggingface/transformers/issues/19802 (dev-learn)
    ("When I reach the trainer.train() step I get a key error from the data collator function - is the script "
     "perhaps outdated, or am I doing something wrong?", "KeyError"),
    ("It throws an AttributeError in the collator.", "AttributeError"),
    ("The training crashed with a ValueError after 200 steps.", "ValueError"),
    ("Running the notebook on Kaggle, I keep getting a type error in the tokenizer call.", "TypeError"),
    ("训练到一半 it failed with an IndexError in the sampler", "IndexError"),
    ("After the update I get this error: `TypeError: forward() got an unexpected keyword argument 'labels'` when "
     "trainer.train() starts.", "TypeError"),
    ("更新后报错 `datasets.exceptions.DatasetGenerationError: An error occurred while generating the dataset`",
     "DatasetGenerationError"),
    # Dao-AILab/causal-conv1d (wave 59 dev): double quotes after the word error, the .so's path naming cuda
    ("but when i run my program,it give an Error\"ImportError: /data/envs/lib/python3.10/site-packages/"
     "causal_conv1d_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: _ZN3c107WarningC1E", "ImportError"),
    ("训练时报错“KeyError: 'input_ids'”，请问怎么解决", "KeyError"),
    ("I always run into the following error: `triton.runtime.errors.OutOfResources: out of resource: shared memory, "
     "Required: 663808, Hardware limit: 101376.`", "OutOfResources"),
])
def test_an_exception_named_in_words_is_the_failure(line: str, kind: str) -> None:
    item = first(line + "\n")
    assert item is not None and item.id == "exception" and kind in item.title and "no traceback" in item.title


@pytest.mark.parametrize("line", [
    "I got a CUDA error when running on two GPUs.",
    "I no longer get the KeyError after upgrading datasets.",
    "If you get a ValueError, set remove_unused_columns=False.",
    "I get a MemoryError while tokenizing.",
    "I got an error.",
    "We used to get a TypeError here, fixed in 4.31.",
    "        raise ValueError(\"Target size must be the same as input size\")",
    "If you see `ValueError: too many values to unpack`, update datasets.",
    "I no longer get `KeyError: 'labels'` since 4.40.",
    "It stops with `RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB`.",
    'I searched for "ValueError: too many values to unpack" and found nothing',
    'It says "RuntimeError: CUDA error: device-side assert triggered" at step 40',
])
def test_no_exception_said(line: str) -> None:
    assert said_raised(line) is None


def test_an_exception_line_with_a_full_width_colon_is_read_as_raised() -> None:
    item = first("AttributeError：'NoneType' object has no attribute 'shape'\n")
    assert item is not None and item.id == "exception" and "AttributeError" in item.title
    assert "no traceback" not in item.title  # the exception's own line, not the person's words


def test_a_traceback_in_the_text_is_read_over_the_words() -> None:
    text = ("I get a key error from the collator:\n"
            "Traceback (most recent call last):\n"
            '  File "/work/train.py", line 9, in <module>\n'
            "    batch = collate(rows)\n"
            "KeyError: 'pixel_values'\n")
    item = first(text)
    assert item.id == "exception" and "pixel_values" in item.title and "no traceback" not in item.title


def test_healthy_training_that_mentions_a_fixed_error_stays_healthy() -> None:
    text = ("I used to get a KeyError in the collator; after remove_unused_columns=False it trains fine.\n"
            + "".join(f"{{'loss': {2.0 - i / 20:.3f}, 'learning_rate': 5e-05, 'epoch': {i / 10:.1f}}}\n"
                      for i in range(1, 12)))
    item = first(text)
    assert item is None or item.id != "exception"


def test_an_exception_class_from_an_errors_module_is_read_as_raised() -> None:
    """A class named without an Error suffix, in its package's module of errors (triton's OutOfResources, dest3d and
    mamba threads of wave 59): raised, with the move its message calls for (not the card's memory)."""
    item = first("请问有人遇到 triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 589824, "
                 "Hardware limit: 101376. Reducing block sizes or num_stages may help. 这个报错吗？\n")
    assert item is not None and item.id == "exception" and "OutOfResources" in item.title
    assert "shared memory per block" in item.title and "no traceback" not in item.title
