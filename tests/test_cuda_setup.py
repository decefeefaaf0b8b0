"""Issue 23: CUDA that cannot start (driver, build, GPU that do not fit) is a CUDA error with its own fix.

The doctor read `RuntimeError: The NVIDIA driver on your system is too old` as an ordinary exception and told
the user to read the message. A maintainer reads every such message the same way, whatever wraps it (an
exception, a UserWarning at import, a rank prefix): the driver, the torch build or the device set-up is wrong,
and no training setting changes that.
"""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream
from loratui.logic.advisor import cuda


def items_of(text: str) -> list:
    return diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")[0]


def first(text: str) -> tuple[str, str]:
    found = items_of(text)
    return (found[0].id, found[0].title) if found else ("", "")


DRIVER_OLD = ("RuntimeError: The NVIDIA driver on your system is too old (found version 11060). Please update your GPU "
              "driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index."
              "aspx Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with "
              "your version of the CUDA driver.")
"""Quoted from a dev record (https://github.com/zai-org/ChatGLM3/issues/100)."""


@pytest.mark.parametrize(("text", "words"), [
    (DRIVER_OLD, "CUDA 11.6"),
    # the same check under torch's import-time warning, another driver, a rank prefix
    ("/opt/conda/lib/python3.10/site-packages/torch/cuda/__init__.py:138: UserWarning: CUDA initialization: The "
     "NVIDIA driver on your system is too old (found version 10020). Please update your GPU driver",
     "CUDA 10.2"),
    ("[rank1]: RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version", "driver"),
    ("RuntimeError: The NVIDIA driver on your system is too old (found version 12020).", "CUDA 12.2 or older"),
])
def test_a_driver_older_than_the_build(text: str, words: str) -> None:
    kind, title = first(text)
    assert kind == "cuda_error"
    assert "driver" in title and words in title


@pytest.mark.parametrize(("text", "words"), [
    ("UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions "
     "before calling NumCudaDevices() that might have already set an error? Error 804: forward compatibility was "
     "attempted on non supported HW (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:109.)", "could not start"),
    ("RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
     "driver from http://www.nvidia.com/Download/index.aspx", "could not start"),
    ("RuntimeError: No CUDA GPUs are available", "could not start"),
    ("UserWarning: CUDA initialization: CUDA unknown error - this may be due to an incorrectly set up environment, "
     "e.g. changing env variable CUDA_VISIBLE_DEVICES after program start.", "could not start"),
    ("NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.",
     "sm_120"),
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device", "no kernels"),
    ("RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable", "busy"),
    ("RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable", "busy"),
    ("RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.", "could not start"),
    ("Failed to initialize NVML: Driver/library version mismatch", "could not start"),
    ("RuntimeError: CUDA error: invalid device function", "no kernels"),
    ("torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised: RuntimeError: Triton Error [CUDA]: invalid "
     "device context", "CUDA error"),
    # ROCm: the build lacks the card's gfx target
    ("RuntimeError: No HIP GPUs are available", "could not start"),
    ("hipErrorNoBinaryForGpu: Unable to find code object for all current devices!", "gfx"),
    ("RuntimeError: HIP error: invalid device function", "gfx"),
    ("rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: No such file or directory for GPU "
     "arch : gfx1103", "gfx"),
    ("RuntimeError: CUDA error: invalid device ordinal", "CUDA_VISIBLE_DEVICES"),
    ("torch.cuda.DeferredCudaCallError: CUDA call failed lazily at initialization with error: device >= 0 && device < "
     "num_gpus INTERNAL ASSERT FAILED at \"../aten/src/ATen/cuda/CUDAContext.cpp\":50", "could not start"),
    ("RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use "
     "the 'spawn' start method", "forked"),
])
def test_cuda_that_cannot_start(text: str, words: str) -> None:
    kind, title = first(text)
    assert kind == "cuda_error"
    assert words in title


def test_two_ranks_on_one_gpu_is_nccl_s_own_failure() -> None:
    """NCCL's `Duplicate GPU detected` is the launch's error (one device per rank), NCCL's own failure rather than a
    CUDA fault: the threads settle it by the launch, and the corpus counts it an exception of the run's."""
    kind, title = first("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
                        "ProcessGroupNCCL.cpp:1970, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version "
                        "2.20.5 ncclInvalidUsage: This usually reflects invalid usage of NCCL library. Last error: "
                        "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000")
    assert kind == "nccl_error" and "same GPU" in title


def test_a_torch_without_cuda_asked_for_it_is_the_scripts_error() -> None:
    """Wave 20's dev half: threads settle `Torch not compiled with CUDA enabled` by the script's device (a CPU run
    that calls torch.cuda, a Mac) or a CUDA build: an error of the script or install, not a CUDA fault; the advice
    names both ways out."""
    kind, title = first("AssertionError: Torch not compiled with CUDA enabled")
    assert kind == "exception"
    assert "CPU-only build" in title and "device='cpu'" in title and "install a CUDA build" in title


def test_flash_attentions_own_gpu_check_is_flash_attention_unavailable() -> None:
    """flash-attn's older builds check the GPU in torch's TORCH_CHECK words, naming no flash-attention (wave 20)."""
    for text in ("RuntimeError: Expected is_sm90 || is_sm8x || is_sm75 to be true, but got false.  (Could this error "
                 "message be improved?  If so, please report an enhancement request to PyTorch.)",
                 "RuntimeError: Expected is_sm8x || is_sm75 to be true, but got false."):
        assert first(text)[0] == "flash_attn_unavailable"


def test_inside_a_traceback_the_cause_is_still_the_driver() -> None:
    text = "\n".join([
        "Traceback (most recent call last):",
        '  File "/home/u/finetune.py", line 40, in <module>',
        "    model = AutoModel.from_pretrained(path, trust_remote_code=True).half().cuda()",
        '  File "/home/u/.venv/lib/python3.10/site-packages/torch/cuda/__init__.py", line 298, in _lazy_init',
        "    torch._C._cuda_init()",
        DRIVER_OLD,
    ])
    kind, title = first(text)
    assert (kind, "CUDA 11.6" in title) == ("cuda_error", True)


def test_the_driver_version_is_read_as_cuda() -> None:
    assert cuda.driver_cuda("found version 11060") == "11.6"
    assert cuda.driver_cuda("found version 9000") == "9.0"
    assert cuda.driver_cuda("too old") == ""


@pytest.mark.parametrize("text", [
    # nvidia-smi's banner and a healthy start say the driver and the CUDA it supports
    "| NVIDIA-SMI 535.54.03              Driver Version: 535.54.03    CUDA Version: 12.2     |",
    "Using CUDA device 0: NVIDIA A100-SXM4-80GB (driver 550.54, CUDA 12.4)",
    "torch 2.3.1+cu121, CUDA available: True, device count: 8",
    "INFO: initializing CUDA, the NVIDIA driver is new enough",
    # an ordinary exception with CUDA in its words is no CUDA error
    "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
])
def test_healthy_lines_about_the_driver_are_no_error(text: str) -> None:
    assert first(text)[0] != "cuda_error"


@pytest.mark.parametrize(("text", "kind"), [
    # bitsandbytes' int8 matmul on a GPU without int8 tensor cores, a version older than the code asks for
    ("cuBLAS API failed with status 15", "bnb_setup"),
    ("AttributeError: module 'bitsandbytes.nn' has no attribute 'Linear4bit'", "bnb_setup"),
    # flash-attention kernels this GPU or dtype lacks
    ("RuntimeError: FlashAttention backward for head dim > 192 requires A100/A800 or H100/H800",
     "flash_attn_unavailable"),
    ("RuntimeError: FlashAttention only support fp16 and bf16 data type", "flash_attn_unavailable"),
])
def test_setup_failures_of_the_gpu_libraries(text: str, kind: str) -> None:
    assert first(text)[0] == kind


@pytest.mark.parametrize("text", [
    "You are attempting to use Flash Attention 2.0 with a model not initialized on GPU. Make sure to move the model "
    "to GPU after initializing it on CPU with `model.to('cuda')`.",
    "WARNING: BNB_CUDA_VERSION=123 environment variable detected; loading libbitsandbytes_cuda123.so.",
    "Flash Attention 2.0 only supports torch.float16 and torch.bfloat16 dtypes, but the current dype in "
    "LlamaForCausalLM is torch.float32. You should run training or inference using Automatic Mixed-Precision",
])
def test_notes_of_a_working_setup_are_no_failure(text: str) -> None:
    assert first(text)[0] == ""


def test_a_config_or_code_with_no_run_in_it_gives_nothing() -> None:
    """Keys that name timeouts, flash-attention, 4-bit loading or devices, and a comment that quotes an error,
    are no evidence of a failure: the doctor says nothing rather than guess."""
    text = "\n".join([
        "python train.py --model llama --lr 2e-4 --batch_size 4 --flash_attn --ddp_timeout 180000000",
        "ddp_timeout: 180000000", "flash_attn: fa2", "load_in_4bit: true", "bnb_4bit_quant_type: nf4",
        "attn_implementation: flash_attention_2", "cuda_visible_devices: 0,1",
        "# if you see CUDA error: device-side assert triggered, check your labels",
        "  # flash_attn is not installed on the CI runner: the test uses sdpa",
    ])
    assert items_of(text) == []


@pytest.mark.parametrize(("text", "words"), [
    # dev record https://github.com/opendatalab/MinerU/issues/1508 (Tesla M40), and the same refusal in another call
    ("RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmStridedBatchedEx(handle, opa, "
     "opb, (int)m, (int)n, (int)k, (void*)&falpha, a, CUDA_R_16BF, (int)lda, stridea, b, CUDA_R_16BF, (int)ldb, "
     "strideb, (void*)&fbeta, c, CUDA_R_16BF, (int)ldc, stridec, (int)num_batches, compute_type, "
     "CUBLAS_GEMM_DEFAULT_TENSOR_OP)`", "bfloat16"),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmEx( handle, opa, opb, m, n, k, "
     "&falpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &fbeta, c, CUDA_R_16BF, ldc, CUDA_R_32F, "
     "CUBLAS_GEMM_DEFAULT_TENSOR_OP)`", "bfloat16"),
    ("../aten/src/ATen/native/cuda/Loss.cu:94: operator(): block: [0,0,0], thread: [3,0,0] Assertion `input_val >= "
     "zero && input_val <= one` failed.", "BCELoss"),
    ("../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [0,0,0], thread: [32,0,0] Assertion "
     "`-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.", "beyond a tensor's size"),
    # the kernel's name comes first on a long THC line whose assertion may be cut away
    ("/pytorch/aten/src/THC/THCTensorIndex.cu:361: void indexSelectLargeIndex(TensorInfo<T, IndexType>, "
     "TensorInfo<T, IndexType>, TensorInfo<long, IndexType>, int, int, IndexType, IndexType, long) [with T = float, "
     "IndexType = unsigned int, DstDim = 2, SrcDim = 2, IdxDim = -2, IndexIsMajor = true]: block: [0,0,0], thread: "
     "[0,0,0] Assertion `srcIndex < srcSelectDimSize` failed.", "embedding table"),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`", "could not start"),
    ("RuntimeError: CUDNN_STATUS_NOT_SUPPORTED. This error may appear if you passed in a non-contiguous input.",
     "cuDNN has no algorithm"),
    ("RuntimeError: CUDA error: device-side assert triggered", "an id out of range"),
])
def test_a_cuda_fault_names_what_its_words_say(text: str, words: str) -> None:
    kind, title = first(text)
    assert kind == "cuda_error" and words in title


# -- the same in the person's words, and the GPU itself failing ------------------------------------------------

@pytest.mark.parametrize("line", [
    "torch.cuda.is_available() returns False even though nvidia-smi shows my RTX 3090.",
    "The GPU is not detected by PyTorch after updating the driver.",
    "显卡驱动版本太低，torch用不了cuda",
    "服务器上检测不到GPU，训练只能跑在CPU上",
])
def test_cuda_that_cannot_start_in_words(line: str) -> None:
    found, title = first(line + "\n")
    assert found == "cuda_error" and "could not start" in title


@pytest.mark.parametrize("line", [
    "Xid 79: GPU has fallen off the bus.",
    "[ 8231.112] NVRM: Xid (PCI:0000:3b:00): 48, pid=2211, An uncorrectable double bit error (DBE) has been detected",
])
def test_the_gpu_itself_failing_is_named_as_hardware(line: str) -> None:
    found, title = first(line + "\n")
    assert found == "cuda_error" and "the GPU itself failed" in title


@pytest.mark.parametrize("line", [
    "The GPU is not detected error was fixed by reinstalling the driver; now training runs fine at 3 it/s.",
    "torch.cuda.is_available() returns True and training runs.",
    "GPU memory is not released after training.",
    "My model is not found on the hub.",
])
def test_cuda_words_that_say_nothing_wrong(line: str) -> None:
    assert first(line + "\n")[0] != "cuda_error"
