"""CUDA library failures in their other words (issue 23, dev): torch's older THC message for a cuBLAS/cuDNN failure
(mmdetection's `cublas runtime error : the GPU program failed to execute`) and cuDNN v8's frontend finding no kernel
(GPT-SoVITS's `GET was unable to find an engine to execute this computation`) are CUDA errors, not a script's."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream


def first(text: str):
    items = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")[0]
    return items[0] if items else None


@pytest.mark.parametrize("message", [
    "RuntimeError: cublas runtime error : resource allocation failed at /pytorch/aten/src/THC/THCGeneral.cpp:250",
    "RuntimeError: cudnn runtime error : the GPU program failed to execute",
    "RuntimeError: FIND was unable to find an engine to execute this computation",
])
def test_a_cuda_library_failure_in_older_or_other_words_is_a_cuda_error(message: str) -> None:
    item = first('Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    loss.backward()\n'
                 + message + "\n")
    assert item is not None and item.id == "cuda_error", item


def test_no_engine_is_told_to_check_the_cudnn_loaded() -> None:
    item = first("RuntimeError: GET was unable to find an engine to execute this computation\n")
    assert item is not None and "cuDNN" in item.title and any("LD_LIBRARY_PATH" in e for e in item.evidence)


def test_an_engine_in_other_words_is_no_cuda_error() -> None:
    item = first("ValueError: unable to find an engine config for the model, check config.json\n")
    assert item is None or item.id != "cuda_error"


def test_cublaslt_that_could_not_start_is_a_cuda_error() -> None:
    """ChatGLM-6B#465 (wave 30's dev half): torch's words when cuBLAS(Lt) could not create its handle."""
    item = first("运行train.sh时，就报了这个错误：\nRuntimeError: Library cublasLt is not initialized\n")
    assert item is not None and item.id == "cuda_error" and "could not start" in item.title
