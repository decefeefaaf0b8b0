"""Issue 23: bitsandbytes' CUDA setup read beyond the lines that say "failed": its warning that the CUDA runtime
is not on the library paths (standing until the setup loads a CUDA binary, which a healthy import does right
after the same warning), its kernels not built for the GPU (`Error named symbol not found at line 74 in file
.../ops.cu`), newer wordings (no GPU support, ROCm and Windows libraries), and any exception raised inside its
setup code, whatever the message. Healthy imports and other libraries' exceptions stay what they are."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream


def first(text: str):
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return items[0] if items else None


def first_id(text: str) -> str:
    item = first(text)
    return item.id if item is not None and item.severity in ("error", "warning") else "healthy"


BANNER = ("===================================BUG REPORT===================================\n"
          "Welcome to bitsandbytes. For bug reports, please run\n\npython -m bitsandbytes\n\n"
          " and submit this information together with your error trace to: "
          "https://github.com/TimDettmers/bitsandbytes/issues\n"
          "================================================================================\n")
COLAB_039 = (BANNER + "bin /usr/local/lib/python3.10/dist-packages/bitsandbytes/libbitsandbytes_cuda122.so\nFalse\n"
             "CUDA_SETUP: WARNING! libcudart.so not found in any environmental path. Searching in backup paths...\n"
             "CUDA SETUP: CUDA runtime path found: /usr/local/cuda/lib64/libcudart.so\n"
             "CUDA SETUP: Highest compute capability among GPUs detected: 7.5\nCUDA SETUP: Detected CUDA version 122\n")
"""https://github.com/bitsandbytes-foundation/bitsandbytes/issues/930 (dev)."""


def test_runtime_warning_with_no_cuda_binary_after_it() -> None:
    item = first(COLAB_039)
    assert item is not None and item.id == "bnb_setup" and item.severity == "warning"
    assert "libcudart" in item.evidence[0]


def test_runtime_warning_then_a_cpu_binary_is_a_setup_problem() -> None:
    text = ("/home/u/.local/lib/python3.8/site-packages/bitsandbytes/cuda_setup/main.py:149: UserWarning: WARNING: "
            "No libcudart.so found! Install CUDA or the cudatoolkit package (anaconda)!\n  warn(msg)\n"
            "CUDA SETUP: Highest compute capability among GPUs detected: 8.0\nCUDA SETUP: Detected CUDA version 118\n"
            "CUDA SETUP: Loading binary /home/u/.local/lib/python3.8/site-packages/bitsandbytes/"
            "libbitsandbytes_cpu.so...\n")
    assert first_id(text) == "bnb_setup"


def test_healthy_import_warns_then_loads_a_cuda_binary() -> None:
    """Colab's usual import of bitsandbytes 0.39-0.41: the warning, then the runtime found in the backup path and
    the CUDA binary loaded; the training that follows is healthy."""
    text = (BANNER + "CUDA_SETUP: WARNING! libcudart.so not found in any environmental path. Searching in backup "
            "paths...\nCUDA SETUP: CUDA runtime path found: /usr/local/cuda/lib64/libcudart.so.11.0\n"
            "CUDA SETUP: Highest compute capability among GPUs detected: 8.0\nCUDA SETUP: Detected CUDA version 118\n"
            "CUDA SETUP: Loading binary /usr/local/lib/python3.10/dist-packages/bitsandbytes/"
            "libbitsandbytes_cuda118.so...\n"
            + "".join(f"{{'loss': {2.1 - i * 0.02:.4f}, 'learning_rate': 0.0002, 'epoch': {i / 100:.2f}}}\n"
                      for i in range(1, 30)))
    assert first_id(text) == "healthy"


@pytest.mark.parametrize("line", [
    "Error named symbol not found at line 74 in file /mmfs1/gscratch/zlab/timdettmers/git/bitsandbytes/csrc/ops.cu",
    "Error invalid device function at line 508 in file /src/csrc/ops.cu",
    "Error no kernel image is available for execution on the device at line 237 in file D:\\bitsandbytes\\csrc\\ops.cu",
    "UserWarning: The installed version of bitsandbytes was compiled without GPU support. 8-bit optimizers, 8-bit "
    "multiplication, and GPU quantization are unavailable.",
    "RuntimeError: Could not load bitsandbytes native library: libbitsandbytes_rocm62.so: cannot open shared object "
    "file: No such file or directory",
    "Could not find the bitsandbytes CUDA binary at WindowsPath('C:/venv/Lib/site-packages/bitsandbytes/"
    "libbitsandbytes_cuda126.dll')",
    "ROCm Setup failed despite ROCm being available. Please run the following command to get more information:",
    "Error: Your GPU does not support Int8 Matmul!",  # bitsandbytes 0.35's int8 kernels on a pre-Turing GPU
])
def test_setup_wordings_of_every_era(line: str) -> None:
    assert first_id(line + "\n") == "bnb_setup"


WINDOWS_LOAD = """Traceback (most recent call last):
  File "C:\\Users\\me\\train.py", line 3, in <module>
    import bitsandbytes as bnb
  File "C:\\Users\\me\\venv\\lib\\site-packages\\bitsandbytes\\__init__.py", line 6, in <module>
    from .autograd._functions import (
  File "C:\\Users\\me\\venv\\lib\\site-packages\\bitsandbytes\\functional.py", line 13, in <module>
    from .cextension import COMPILED_WITH_CUDA, lib
  File "C:\\Users\\me\\venv\\lib\\site-packages\\bitsandbytes\\cextension.py", line 27, in initialize
    self.lib = ct.cdll.LoadLibrary(binary_path)
  File "C:\\Python310\\lib\\ctypes\\__init__.py", line 452, in LoadLibrary
    return self._dlltype(name)
  File "C:\\Python310\\lib\\ctypes\\__init__.py", line 374, in __init__
    self._handle = _dlopen(self._name, mode)
OSError: [WinError 193] %1 is not a valid Win32 application
"""
WINDOWS_PATHS = """Traceback (most recent call last):
  File "D:\\kohya\\train_network.py", line 12, in <module>
    import bitsandbytes
  File "D:\\kohya\\venv\\lib\\site-packages\\bitsandbytes\\cuda_setup\\main.py", line 131, in evaluate_cuda_setup
    cuda_home = str(Path(cuda_lib_path).parent.parent)
  File "D:\\kohya\\venv\\lib\\site-packages\\bitsandbytes\\cuda_setup\\paths.py", line 62, in determine_cuda_runtime_lib_path
    if "CONDA_PREFIX" in candidate_env_vars:
TypeError: argument of type 'WindowsPath' is not iterable
"""


@pytest.mark.parametrize("text", [WINDOWS_LOAD, WINDOWS_PATHS], ids=["dll_load", "windowspath"])
def test_an_exception_raised_in_bitsandbytes_setup_code(text: str) -> None:
    item = first(text)
    assert item is not None and item.id == "bnb_setup" and item.severity == "error"


def test_an_exception_raised_by_another_library_under_bitsandbytes_is_not_setup() -> None:
    text = """Traceback (most recent call last):
  File "/work/train.py", line 40, in <module>
    trainer.train()
  File "/venv/lib/python3.10/site-packages/bitsandbytes/optim/optimizer.py", line 287, in step
    self.update_step(group, p, gindex, pindex)
  File "/venv/lib/python3.10/site-packages/bitsandbytes/functional.py", line 1584, in optimizer_update_8bit_blockwise
    is_on_gpu([p, g, state1, state2, qmap1, qmap2, absmax1, absmax2])
  File "/venv/lib/python3.10/site-packages/torch/utils/_device.py", line 77, in __torch_function__
    return func(*args, **kwargs)
RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!
"""
    assert first_id(text) == "exception"


def test_the_runtime_warning_alone_says_nothing_of_the_outcome() -> None:
    """A paste of the warning with nothing after it: a healthy import prints it too (see
    test_failure_dialects.py::test_bitsandbytes_at_work_is_not_a_setup_failure)."""
    assert first_id("CUDA_SETUP: WARNING! libcudart.so not found in any environmental path. Searching in backup "
                    "paths...\n") == "healthy"


@pytest.mark.parametrize("line, title", [
    ("RuntimeError: No GPU found. A GPU is needed for quantization.", "cannot use the GPU"),
    ("ImportError: The installed version of bitsandbytes (<0.43.1) requires CUDA, but CUDA is not available. You "
     "may need to install PyTorch with CUDA support or upgrade bitsandbytes to >=0.43.1.", "bitsandbytes"),
    ("ImportError: Using `load_in_8bit=True` requires Accelerate: `pip install accelerate` and the latest version of "
     "bitsandbytes `pip install -i https://test.pypi.org/simple/ bitsandbytes` or pip install bitsandbytes`",
     "missing or older"),
    ("ValueError: You are trying to use bitsandbytes quantization but bitsandbytes is not installed",
     "not installed"),
    ("ImportError: Please install bitsandbytes>=0.45.3 to use 8-bit optimizers", "0.45.3"),
    ("RuntimeError: Failed to import transformers.integrations.bitsandbytes because of the following error (look up "
     "to see its traceback):", "bitsandbytes"),
    ("ERROR: bitsandbytes-0.41.1-py3-none-win_amd64.whl is not a supported wheel on this platform.", "no bitsandbytes build"),
    ("ERROR: No matching distribution found for bitsandbytes>=0.43.2", "no bitsandbytes build"),
])
def test_messages_that_ask_for_bitsandbytes(line: str, title: str) -> None:
    item = first(line + "\n")
    assert item is not None and item.id == "bnb_setup" and title in item.title


@pytest.mark.parametrize("line", [
    "!pip install -q -U bitsandbytes accelerate",  # a notebook cell installing it
    "pip install bitsandbytes==0.41.1",
    "Requirement already satisfied: bitsandbytes in /usr/local/lib/python3.10/dist-packages (0.41.1)",
])
def test_installing_it_is_no_failure(line: str) -> None:
    assert first_id(line + "\n") == "healthy"


def test_a_dependency_missing_under_bitsandbytes_import_gets_its_install() -> None:
    text = """Traceback (most recent call last):
  File "/work/train.py", line 3, in <module>
    import bitsandbytes as bnb
  File "/venv/lib/python3.10/site-packages/bitsandbytes/__init__.py", line 6, in <module>
    import scipy
ModuleNotFoundError: No module named 'scipy'
"""
    item = first(text)
    assert item is not None and item.id == "exception" and "pip install scipy" in item.title


# -- a mismatch raised inside any of bitsandbytes' code -----------------------------------------------------------

NAME_LIB = """Traceback (most recent call last):
  File "/home/u/train.py", line 88, in <module>
    trainer.train()
  File "/opt/conda/lib/python3.10/site-packages/bitsandbytes/functional.py", line 1320, in dequantize_4bit
    lib.cdequantize_blockwise_fp16_nf4(get_ptr(None), get_ptr(A), get_ptr(absmax), get_ptr(out))
NameError: name 'lib' is not defined
"""
NO_SCB = """Traceback (most recent call last):
  File "/home/u/finetune.py", line 41, in <module>
    model.save_pretrained("out")
  File "/usr/local/lib/python3.10/dist-packages/transformers/modeling_utils.py", line 2510, in save_pretrained
    state_dict = model_to_save.state_dict()
  File "/usr/local/lib/python3.10/dist-packages/bitsandbytes/nn/modules.py", line 312, in _save_to_state_dict
    self.weight.SCB
AttributeError: 'Int8Params' object has no attribute 'SCB'
"""
# The pattern of https://github.com/eosphoros-ai/DB-GPT-Hub/issues/193 (dev-learn), with a real traceback's frame:
# an old bitsandbytes loading a state dict it was not written for; fixed by upgrading bitsandbytes.
NONE_BIAS = """Traceback (most recent call last):
  File "C:\\\\Users\\\\me\\\\proj\\\\train.py", line 20, in <module>
    model.load_state_dict(torch.load("adapter.bin"), strict=False)
  File "C:\\\\Users\\\\me\\\\venv\\\\lib\\\\site-packages\\\\bitsandbytes\\\\nn\\\\modules.py", line 254, in _load_from_state_dict
    self.bias.data = bias_data.to(self.bias.data.device)
AttributeError: 'NoneType' object has no attribute 'to'
"""
SIGNATURE = """Traceback (most recent call last):
  File "/app/qlora.py", line 300, in <module>
    model = get_peft_model(model, config)
  File "/app/venv/lib/python3.11/site-packages/bitsandbytes/nn/modules.py", line 180, in __new__
    return Params4bit._make(data, requires_grad, quant_state, **kwargs)
TypeError: Params4bit._make() got an unexpected keyword argument 'quant_storage'
"""


@pytest.mark.parametrize("text", [NAME_LIB, NO_SCB, NONE_BIAS, SIGNATURE], ids=["name_lib", "no_scb", "none_bias",
                                                                               "signature"])
def test_a_mismatch_raised_inside_bitsandbytes_is_its_version(text: str) -> None:
    item = first(text)
    assert item is not None and item.id == "bnb_setup" and "pip install -U bitsandbytes" in item.title


def test_a_value_error_inside_bitsandbytes_stays_the_exception() -> None:
    """A bad input reaches bitsandbytes (tensors on two devices, a shape): the caller's, not the installed version."""
    text = """Traceback (most recent call last):
  File "/work/train.py", line 40, in <module>
    out = model(**batch)
  File "/venv/lib/python3.10/site-packages/bitsandbytes/functional.py", line 426, in is_on_gpu
    raise TypeError(f'Input tensors need to be on the same GPU, but found the following tensor and device combinations')
TypeError: Input tensors need to be on the same GPU, but found the following tensor and device combinations
"""
    assert first_id(text) == "exception"


def test_an_attribute_error_in_the_users_code_beside_bitsandbytes_is_no_setup() -> None:
    text = """Traceback (most recent call last):
  File "/venv/lib/python3.10/site-packages/bitsandbytes/nn/modules.py", line 300, in forward
    out = self.hook(x)
  File "/work/mymodel.py", line 12, in hook
    return x.half_precision()
AttributeError: 'Tensor' object has no attribute 'half_precision'
"""
    assert first_id(text) == "exception"


@pytest.mark.parametrize("text", [
    "RuntimeError: Error building extension 'bitsandbytes'\n",
    "  ERROR: Failed building wheel for bitsandbytes\nERROR: Could not build wheels for bitsandbytes, which is required "
    "to install pyproject.toml-based projects\n",
    "error: command '/usr/local/cuda/bin/nvcc' failed with exit status 1 while compiling bitsandbytes/csrc/kernels.cu\n",
])
def test_building_bitsandbytes_fails(text: str) -> None:
    item = first(text)
    assert item is not None and item.id == "bnb_setup" and "building it failed" in item.title


@pytest.mark.parametrize("text", [
    "  Building wheel for bitsandbytes (setup.py) ... done\nSuccessfully installed bitsandbytes-0.43.1\n",
    "  ERROR: Failed building wheel for flash-attn\n",
])
def test_a_build_that_succeeds_or_another_packages_is_no_bitsandbytes_setup(text: str) -> None:
    assert first_id(text) != "bnb_setup"


@pytest.mark.parametrize("text", [
    "bitsandbytes doesn't work on my Windows machine, 4-bit loading fails.\n",
    "I can't get bitsandbytes to use the GPU on my AMD card.\n",
    "load_in_4bit=True fails because bitsandbytes is too old.\n",
    "bitsandbytes 报错，装了最新版还是不行\n",
    "Installing bitsandbytes on Jetson fails.\n",
])
def test_bitsandbytes_failing_in_the_persons_words(text: str) -> None:
    assert first_id(text) == "bnb_setup"


@pytest.mark.parametrize("text", [
    "The 8-bit optimizer from bitsandbytes works fine, the loss goes down.\n",
    "After upgrading bitsandbytes the problem was solved.\n",
    "bitsandbytes is installed, but training fails with a NaN loss at step 30.\n",
    "I use bitsandbytes 8-bit Adam; the run failed later with CUDA out of memory.\n",
])
def test_bitsandbytes_named_beside_another_failure_is_not_its_setup(text: str) -> None:
    assert first_id(text) != "bnb_setup"
