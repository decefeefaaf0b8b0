"""torch's words for "no GPU at all" are read in one place (advisor/cuda.py NO_GPU): the CUDA-setup reading and an
exception's next step (advisor/failure.py) agree on every one of them, and on what is not one."""

from __future__ import annotations

import re

import pytest

from loratui.logic.advisor import cuda
from loratui.logic.advisor.failure import next_step
from loratui.logic.tracebacks import Raised

SEES_NONE = "this torch cannot see a GPU: install a CUDA build of torch for this driver, or check nvidia-smi"


@pytest.mark.parametrize("message", [
    "Torch not compiled with CUDA enabled",
    "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver",
    "No CUDA GPUs are available",
])
def test_torch_seeing_no_gpu_is_one_reading(message: str) -> None:
    assert next_step(Raised("AssertionError", message, f"AssertionError: {message}"), None) == SEES_NONE
    assert re.search(cuda.SETUP, message, re.I)


@pytest.mark.parametrize("message", [
    "No HIP GPUs are available",  # ROCm's: CUDA setup, but not "install a CUDA build"
    "CUDA error: an illegal memory access was encountered",
])
def test_other_cuda_words_are_not_a_torch_that_sees_no_gpu(message: str) -> None:
    assert next_step(Raised("RuntimeError", message, f"RuntimeError: {message}"), None) != SEES_NONE


def test_an_embedding_lookup_past_its_table_says_vocab_or_positions() -> None:
    """A Trainer script whose data held token ids past the vocabulary raised `IndexError: index out of range in
    self` inside torch's embedding(); the advice was "check that the arguments your code passes match the installed
    torch version", which sends one to reinstall torch."""
    from loratui.logic.advisor.failure import LOOKUP_STEP
    from loratui.logic.tracebacks import Frame
    frames = (Frame("/home/u/train.py", "<module>"),
              Frame("/v/lib/python3.11/site-packages/torch/nn/functional.py", "embedding"))
    step = next_step(Raised("IndexError", "index out of range in self", "IndexError: index out of range in self",
                            frames), None)
    assert step == LOOKUP_STEP and "resize_token_embeddings" in step and "max_position_embeddings" in step
    assert "torch version" not in step
