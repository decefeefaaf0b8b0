"""Issue 23: flash-attention that cannot be used, read beyond its own messages: its build failing (`Building wheel
for flash-attn (setup.py) ... error`, `Failed building wheel for flash-attn`), the person's words that it does not
work (English or Chinese), and a load or mismatch error raised inside its package whose message does not name it
(`import flash_attn_2_cuda` -> `libcudart.so.12: cannot open shared object file`). A build that succeeds, a run that
uses it happily, another package's error raised under it stay what they are."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream


def first_id(text: str) -> str:
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return items[0].id if items else ""


IMPORT_INSIDE = """Traceback (most recent call last):
  File "/work/train.py", line 5, in <module>
    from flash_attn import flash_attn_func
  File "/usr/local/lib/python3.10/site-packages/flash_attn/__init__.py", line 3, in <module>
    from flash_attn.flash_attn_interface import (
  File "/usr/local/lib/python3.10/site-packages/flash_attn/flash_attn_interface.py", line 10, in <module>
    import flash_attn_2_cuda as flash_attn_cuda
ImportError: libcudart.so.12: cannot open shared object file: No such file or directory
"""


@pytest.mark.parametrize("text", [
    "  Building wheel for flash-attn (setup.py) ... error\n  error: subprocess-exited-with-error\n",
    "  ERROR: Failed building wheel for flash-attn\n",
    "Flash attention 2 doesn't work on Windows, is there a workaround?\n",
    "训练时报错说flash_attn版本不对，装了2.5.8还是不行\n",
    "flash-attn 装不上，一直编译失败\n",
    IMPORT_INSIDE,
    # R28 (twenty-eighth session): flash-attention's Triton kernel written for Triton before 2.0, run on a newer one
    "Loading with attn_impl='triton' I get\nTypeError: dot() got an unexpected keyword argument 'trans_b'\n",
    "Fine-tuning crashes at the first batch with TypeError(\"dot() got an unexpected keyword argument 'trans_b'\")\n",
])
def test_flash_attention_that_cannot_be_used(text: str) -> None:
    assert first_id(text) == "flash_attn_unavailable"


@pytest.mark.parametrize("text", [
    "  Building wheel for flash-attn (setup.py) ... done\nSuccessfully installed flash-attn-2.5.8\n",
    "Flash attention works great now, thanks!\n",
    "We use flash attention 2 and the loss goes down nicely; attn_implementation=\"flash_attention_2\".\n",
    # `does not work` said of other attempts, flash-attention named after it as the fix (the pattern of a dev-learn
    # LLaMA-Factory thread whose loss is 0 with grad_norm nan)
    "I tried bf16 false, fp16 true and a newer deepspeed, but that does not work. Setting flash_attn: disabled "
    "works for me.\n",
    # a value error inside it is the caller's input, not its install
    """Traceback (most recent call last):
  File "/work/train.py", line 40, in <module>
    out = model(**batch)
  File "/usr/local/lib/python3.10/site-packages/flash_attn/flash_attn_interface.py", line 51, in _flash_attn_forward
    q, k, v = [maybe_contiguous(x) for x in (q, k, v)]
ValueError: too many values to unpack (expected 3)
""",
    # another library raised it, with flash-attention further out
    """Traceback (most recent call last):
  File "/usr/local/lib/python3.10/site-packages/flash_attn/bert_padding.py", line 20, in forward
    return torch.gather(x, 0, idx)
  File "/usr/local/lib/python3.10/site-packages/einops/einops.py", line 400, in rearrange
    return reduce(tensor, pattern, reduction='rearrange', **axes_lengths)
ImportError: cannot import name 'EinopsError' from partially initialized module 'einops'
""",
    # another function's keyword of the same name is no flash-attention kernel (R28)
    "TypeError: forward() got an unexpected keyword argument 'trans_b'\n",
])
def test_flash_attention_in_use_or_others_errors_are_not_its_setup(text: str) -> None:
    assert first_id(text) != "flash_attn_unavailable"


# the pattern of llm-jp-sft#41 (dev): pip's newer output names the package only on `Collecting flash-attn`; the error
# comes out of flash-attn's own setup.py in pip's build directory, whatever it is
BUILD_FAILS = """Collecting flash-attn
  Downloading flash_attn-2.6.3.tar.gz (2.6 MB)
  Preparing metadata (setup.py) ... error
  error: subprocess-exited-with-error
      Traceback (most recent call last):
        File "<string>", line 2, in <module>
        File "/tmp/pip-install-q1w2e3r4/flash-attn_0123456789abcdef0123456789abcdef/setup.py", line 22, in <module>
          import torch
      ModuleNotFoundError: No module named 'torch'
      [end of output]
error: metadata-generation-failed
"""


@pytest.mark.parametrize("where", ["/tmp/pip-install-q1w2e3r4/flash-attn_0123456789abcdef0123456789abcdef",
                                   "/home/me/src/flash-attention", "/tmp/flash_attn-2.6.3"])
def test_an_error_out_of_flash_attns_own_build_is_its_install(where: str) -> None:
    text = BUILD_FAILS.replace("/tmp/pip-install-q1w2e3r4/flash-attn_0123456789abcdef0123456789abcdef", where)
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    assert items[0].id == "flash_attn_unavailable" and "did not install: its setup.py failed" in items[0].title
    assert "No module named 'torch'" in items[0].evidence[0]


def test_another_packages_build_is_not_flash_attns() -> None:
    text = BUILD_FAILS.replace("flash-attn_0123456789abcdef0123456789abcdef", "deepspeed_0123456789abcdef01234567")
    assert first_id(text) != "flash_attn_unavailable"


@pytest.mark.parametrize("line", ["  ERROR: Failed building wheel for dropout-layer-norm",
                                  "Failed to build rotary-emb", "ERROR: Could not build wheels for xentropy-cuda-lib"])
def test_a_build_of_flash_attns_own_extensions_is_its_install(line: str) -> None:
    """flash-attention's csrc/ extensions, which model READMEs ask users to build (`pip install csrc/layer_norm`,
    Qwen#241 from wave 29's dev half): their build failing is flash-attn's."""
    assert first_id(line + "\n") == "flash_attn_unavailable"


def test_apexs_fused_layer_norm_is_not_flash_attns() -> None:
    assert first_id("Failed building wheel for fused-layer-norm-cuda\n") != "flash_attn_unavailable"


def test_the_triton_kernels_advice_names_its_own_fix() -> None:
    items, _ = diagnose_stream(io.BytesIO(b"TypeError: dot() got an unexpected keyword argument 'trans_b'\n"), "pasted")
    assert items[0].id == "flash_attn_unavailable"
    assert "Triton" in items[0].title and "uninstall triton" in items[0].title
