"""Issue 23: an ordinary Python exception is named with its frame, and no GPU cause is invented for it.

Many exceptions speak of CUDA, devices, half precision, losses or evaluation without being a CUDA fault, an OOM
or a loss problem; the doctor names the exception, where it was raised, and the next step its message gives. A
DataLoader worker that died gets the step its message points at (shared memory, the kernel's OOM killer, or
the worker's own error hidden behind it).
"""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream


def traceback_of(error: str, library: str = "transformers/trainer.py", func: str = "training_step") -> str:
    return "\n".join([
        "Traceback (most recent call last):",
        '  File "/home/u/sft/train.py", line 88, in main',
        "    trainer.train()",
        f'  File "/home/u/.venv/lib/python3.10/site-packages/{library}", line 3000, in {func}',
        "    loss = self.compute_loss(model, inputs)",
        error,
    ])


def first(text: str):  # type: ignore[no-untyped-def]
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return items[0]


@pytest.mark.parametrize("error", [
    "RuntimeError: Input type (torch.cuda.HalfTensor) and weight type (torch.cuda.FloatTensor) should be the same",
    "RuntimeError: Expected a 'cuda' device type for generator but found 'cpu'",
    "ValueError: Your setup doesn't support bf16/gpu. You need torch>=1.10, using Ampere GPU with cuda>=11.0",
    "RuntimeError: expected scalar type Half but found Float",
    "ValueError: The model did not return a loss from the inputs, only the following keys: logits.",
    "KeyError: \"The `metric_for_best_model` training argument is set to 'eval_loss', which is not found in the "
    "evaluation metrics. The available evaluation metrics are: ['eval_runtime'].\"",
    "RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: "
    "[torch.cuda.FloatTensor [4096]] is at version 3; expected version 2 instead.",
    "NotImplementedError: Cannot copy out of meta tensor; no data! Please use torch.nn.Module.to_empty() instead of "
    "torch.nn.Module.to() when moving module from meta to a different device.",
])
def test_an_ordinary_exception_is_named_with_its_frame(error: str) -> None:
    item = first(traceback_of(error))
    kind = error.split(":", 1)[0].rsplit(".", 1)[-1]
    assert item.id == "exception"
    assert item.title.startswith(f"The run failed on {kind}")
    assert any("inside the transformers library in training_step()" in line for line in item.evidence)


@pytest.mark.parametrize(("error", "words"), [
    ("RuntimeError: DataLoader worker (pid 4321) is killed by signal: Bus error. It is possible that dataloader's "
     "workers are out of shared memory. Please try to raise your shared memory limit.", "--shm-size"),
    ("RuntimeError: DataLoader worker (pid 12345) is killed by signal: Killed.", "out-of-memory killer"),
    ("RuntimeError: DataLoader worker (pid(s) 4321, 4322) exited unexpectedly", "dataloader_num_workers=0"),
])
def test_a_dataloader_worker_that_died_gets_its_step(error: str, words: str) -> None:
    item = first(traceback_of(error, "torch/utils/data/dataloader.py", "_try_get_data"))
    assert item.id == "exception" and words in item.title


def test_a_name_another_package_lacks_is_a_version_mismatch_not_flash_attention() -> None:
    # remote model code written for another transformers (the name became is_flash_attn_2_available)
    item = first("ImportError: cannot import name 'is_flash_attn_available' from 'transformers.utils' "
                 "(/usr/local/lib/python3.10/dist-packages/transformers/utils/__init__.py)")
    assert item.id == "exception"
    assert "the installed transformers has no is_flash_attn_available" in item.title
    assert "pip show transformers" in item.title
    # the same words about flash-attention's own package: it is installed but not the version the code needs
    assert first("ImportError: cannot import name 'flash_attn_func' from 'flash_attn' "
                 "(/usr/local/lib/python3.10/dist-packages/flash_attn/__init__.py)").id == "flash_attn_unavailable"


KEYBOARD = [
    "---------------------------------------------------------------------------",
    "KeyboardInterrupt                         Traceback (most recent call last)",
    "Cell In[7], line 1",
    "----> 1 ds = ds.map(tokenize, num_proc=4)",
    "File /usr/local/lib/python3.10/dist-packages/datasets/arrow_dataset.py:602, in wrapper(*args, **kwargs)",
    "KeyboardInterrupt: ",
]


def test_a_run_stopped_by_hand_is_no_failure_and_what_made_them_stop_it_leads() -> None:
    crawl = "Map (num_proc=4):  12%|█▏        | 6000/50000 [25:00<3:03:20,  4.00 examples/s]"
    items, _ = diagnose_stream(io.BytesIO("\n".join([crawl] + KEYBOARD).encode()), "pasted")
    assert [(a.id, a.severity) for a in items] == [("data_starved", "info"), ("exception", "info")]
    assert "stopped by hand" in items[1].title
    alone, _ = diagnose_stream(io.BytesIO("\n".join(KEYBOARD).encode()), "pasted")
    assert [(a.id, a.severity) for a in alone] == [("exception", "info")]
