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


# ROCm/ROCm#4021-like runs (axolotl on MI300X): the HSA runtime's own words when the GPU hangs or faults
@pytest.mark.parametrize("line, says", [
    (" 41%|####      | 366/903 [5:15:39<6:53:09, 46.16s/it]HW Exception by GPU node-9 (Agent handle: 0x631351bb5a20) "
     "reason :GPU Hang", "hung"),
    ("Memory access fault by GPU node-1 (Agent handle: 0x5d42da5e3580) on address 0x7a39d6506000. Reason: Page not "
     "present or supervisor privilege.", "memory it does not own"),
    ("RuntimeError: HIP error: an illegal memory access was encountered", "AMD_SERIALIZE_KERNEL=3"),
])
def test_a_rocm_fault_is_a_gpu_error_debugged_with_rocm_s_switch(line: str, says: str) -> None:
    item = first(line + "\nAborted (core dumped)\n")
    assert item is not None and item.id == "cuda_error", item
    assert item.title.startswith("GPU error (ROCm)") and says in item.title + " ".join(item.evidence)
    assert item.change == {"env.AMD_SERIALIZE_KERNEL": "3"}


def test_a_cuda_fault_keeps_cuda_s_switch() -> None:
    item = first("RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert item is not None and item.change == {"env.CUDA_LAUNCH_BLOCKING": "1"} and item.title.startswith("CUDA")


def test_hsa_out_of_resources_is_no_fault() -> None:
    item = first("HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary resources.\n")
    assert item is None or item.id != "cuda_error" or "ROCm" not in item.title


@pytest.mark.parametrize("text", [
    # CatBoost's C++ exception, with the code
    "(class TCatBoostException) catboost/cuda/cuda_lib/cuda_base.h:63: CUDA error 4: unspecified launch failure\n",
    # XGBoost's thrust error, no code, under the C++ runtime's own line (read as the process dying otherwise)
    "terminate called after throwing an instance of 'thrust::system::system_error'\n"
    "  what():  /src/xgboost/src/predictor/gpu_predictor.cu(322): unspecified launch failure\n",
    # LightGBM's GPU path runs on OpenCL
    "lightgbm.basic.LightGBMError: No OpenCL device found\n",
    "[LightGBM] [Fatal] Unknown OpenCL Error (221)\n",
    # the other CUDA libraries' statuses: torch.fft on a card its cuFFT lacks (wave 84 dev), linalg's cuSOLVER
    "RuntimeError: cuFFT error: CUFFT_INTERNAL_ERROR\n",
    "RuntimeError: cusolver error: CUSOLVER_STATUS_EXECUTION_FAILED, when calling `cusolverDnSgetrf`\n",
    # R33 (thirtieth session): XLA's words for cuSOLVER, and glog's CHECK of a CUDA call in Caffe's C++ with its code
    "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: cuSolver internal error\n",
    "F0101 10:00:00.000000  1234 conv_layer.cu:28] Check failed: error == cudaSuccess (77 vs. 0)  an illegal memory "
    "access was encountered\n",
    "F0101 10:00:00.000000  1234 im2col.cu:61] Check failed: error == cudaSuccess (11 vs. 0)  invalid argument\n",
])
def test_cuda_s_error_strings_as_native_libraries_print_them_are_a_cuda_error(text: str) -> None:
    item = first(text)
    assert item is not None and item.id == "cuda_error", item


def test_cuda_error_2_is_the_out_of_memory_it_says() -> None:
    item = first("catboost/cuda/cuda_lib/cuda_base.h:281: CUDA error 2: out of memory\n")
    assert item is None or item.id != "cuda_error", item
    item = first("F0101 10:00:00.000000  1234 syncedmem.cpp:64] Check failed: error == cudaSuccess (2 vs. 0)  out of "
                 "memory\n")
    assert item is not None and item.id == "oom_full", item


@pytest.mark.parametrize(("text", "says"), [
    # TensorFlow's cuDNN older than its build (Colab), JAX's CUDA library that does not load
    ("Loaded runtime CuDNN library: 8.0.5 but source was compiled with: 8.1.0.  CuDNN library needs to have matching "
     "major version and equal or higher minor version.\n", "missing or older"),
    ("RuntimeError: Unable to load cuSPARSE. Is it installed?\n", "missing or older"),
    ("ImportError: libcublas.so.9.0: cannot open shared object file: No such file or directory\n", "missing or older"),
    # R33: TensorFlow's own check on Windows, Julia's CUDA.jl without its cuDNN
    ("ImportError: Could not find 'cudnn64_7.dll'. TensorFlow requires that this DLL be installed in a directory that "
     "is named in your %PATH% environment variable.\n", "missing or older"),
    ("AssertionError: This functionality is unavailabe as CUDNN is missing.\n", "missing or older"),
    # an extension built for other cards (tiny-cuda-nn, wave 83 dev)
    ("OSError: Could not find compatible tinycudann extension for compute capability 86.\n", "no build for this GPU"),
    ("UnknownError: Failed to get convolution algorithm. This is probably because cuDNN failed to initialize, so try "
     "looking to see if a warning log message was printed above.\n", "memory growth"),
    # a kernel for another GPU (TensorFlow's `invalid device function`)
    ("F tensorflow/core/kernels/random_op_gpu.h:227] Non-OK-status: GpuLaunchKernel(FillPhiloxRandomKernelLaunch) "
     "status: Internal: invalid device function\n", "no kernels for this GPU"),
])
def test_cuda_libraries_that_do_not_match_are_a_cuda_setup_error(text: str, says: str) -> None:
    item = first(text)
    assert item is not None and item.id == "cuda_error" and says in item.title, item


def test_a_cutlass_error_is_a_cuda_error() -> None:
    item = first("Got cutlass error: Error Internal at: 346\n")
    assert item is not None and item.id == "cuda_error", item


@pytest.mark.parametrize(("text", "says"), [
    ("ptxas /tmp/tmpmx6139nu.ptx, line 1880; error   : Feature '.bf16' requires .target sm_80 or higher\n", "bf16"),
    ("RuntimeError: INTERNAL: CustomCall failed: jaxlib/cuda_prng_kernels.cc:30: operation cudaGetLastError() "
     "failed: the provided PTX was compiled with an unsupported toolchain.\n", "driver is older"),
    ("FAILED_PRECONDITION: Couldn't get ptxas version string: INTERNAL: Couldn't invoke ptxas --version\n",
     "ptxas"),
])
def test_the_run_time_cuda_compiler_failing_is_a_cuda_setup_error(text: str, says: str) -> None:
    item = first(text)
    assert item is not None and item.id == "cuda_error" and says in item.title, item
