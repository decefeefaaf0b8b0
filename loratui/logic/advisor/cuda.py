"""CUDA that cannot start: the driver, the torch build and the GPU that do not fit one another.

These failures come before any kernel runs, in torch's own words of every version: a driver older than the
CUDA torch was built for (`The NVIDIA driver on your system is too old (found version 11060)`, `CUDA driver
version is insufficient for CUDA runtime version`), CUDA that does not initialise (`CUDA initialization: ...`,
`Unexpected error from cudaGetDeviceCount()`, `Found no NVIDIA driver on your system`, a CPU-only torch), a
GPU newer than the build's kernels (`sm_120 is not compatible with the current PyTorch installation`, `no kernel
image is available`), devices held in exclusive mode, a device index beyond the visible ones, CUDA touched
in a forked worker. Each names its own fix; reading the message is enough, no traceback is needed. Pure.
"""

from __future__ import annotations

import re
from loratui.logic.advisor.advice import ERROR, Advice, Finding

_XID = r"\bXid\b(?: \(PCI:[\w:.]+\))?:? ?\d+"
_GPU_LOST = r"fallen off the bus|uncorrectable (?:ECC|double bit)"
"""The GPU itself failed, in the driver's words (its Xid report, off the PCIe bus, an ECC fault): CUDA cannot start
on it (SETUP) and a run on it faults (FAULT_HINTS)."""

_CPU_ONLY = r"Torch not compiled with CUDA enabled"
_NO_DEVICE = r"Found no NVIDIA driver|no CUDA GPUs are available"
NO_GPU = re.compile(_CPU_ONLY + r"|" + _NO_DEVICE, re.I)
"""torch saying it sees no GPU at all (a CPU-only build, no driver, no CUDA device): part of SETUP, and what an
exception's next step reads (failure.next_step)."""

_LIBRARY_SAID = (r"Loaded runtime CuDNN library|\bUnable to load cu[A-Z]+\b|"
                 r"\blib(?:cu(?:blas|blasLt|dnn|fft|rand|solver|sparse)|nvrtc)\w*\.so[.\d]*: cannot open shared object|"
                 r"Could not find '(?:cudart|cudnn|cublas|cufft|curand|cusolver|cusparse)64_\d+\.dll'|"
                 r"\bunavailabl?e as CU[A-Z]+ is missing\b")
"""A CUDA library the framework loads that is missing or older than its build (TensorFlow's `Loaded runtime CuDNN
library: 8.0.5 but source was compiled with: 8.1.0`, JAX's `Unable to load cuSPARSE. Is it installed?`, an import's
`ImportError: libcusolver.so.8.0: cannot open shared object file`), on Windows TensorFlow's own check (`ImportError:
Could not find 'cudart64_90.dll'`), in Julia CUDA.jl's words (`This functionality is unavailabe as CUDNN is missing`).
Not libcudart's .so: bitsandbytes' setup names it."""
_CONV_ALGO_SAID = r"Failed to get convolution algorithm"
"""cuDNN that could not start under TensorFlow (`... This is probably because cuDNN failed to initialize`)."""
_PTX_TOOLCHAIN_SAID = r"PTX was compiled with an unsupported toolchain"
_PTXAS_FAILED = (r"Couldn'?t (?:get ptxas version|invoke ptxas)|Failed to launch ptxas|ptxas returned an error|"
                 r"\bptxas\b[^\n]{0,120}\berror\s*:")
"""The CUDA compiler JAX, XLA and Triton call at run time: missing (`Couldn't invoke ptxas --version`, `Failed to
launch ptxas`) or refusing this GPU (`ptxas ... error : Feature '.bf16' requires .target sm_80 or higher`); with
`_PTX_TOOLCHAIN_SAID`, newer than the driver (`the provided PTX was compiled with an unsupported toolchain`)."""

SETUP = (
    r"driver on your system is too old|driver version is insufficient for CUDA runtime|"
    r"CUDA initialization: (?!.{0,40}\bsucce)|cudaGetDeviceCount\(\)|" + _NO_DEVICE + r"|no HIP GPUs are available|"
    r"CUDA driver initialization failed|Failed to initialize NVML|"
    r"CUDA capability sm_\d+ is not compatible with the current PyTorch|"
    r"no kernel image is available(?!.{0,80}\bat line \d+ in file)|hipErrorNoBinaryForGpu|"
    # an extension built for other cards (tiny-cuda-nn's `Could not find compatible tinycudann extension for compute
    # capability 75`): no kernels for this one, as `no kernel image` says
    r"\bextension for compute capability \d+|"
    r"Unable to find code object for all current devices|TensileLibrary\S*\.dat|for GPU arch ?: ?gfx\w+|"
    + _CPU_ONLY + r"|CUDA unknown error|"
    r"CUDA-capable device(?:s|\(s\))? (?:is|are|is/are) busy or unavailable|"
    r"invalid device ordinal|Cannot re-initialize CUDA in forked subprocess|invalid device function|"
    + _LIBRARY_SAID + "|" + _CONV_ALGO_SAID + "|" + _PTXAS_FAILED + "|" + _PTX_TOOLCHAIN_SAID + "|"
    r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver|"
    r"DeferredCudaCallError|CUDA call failed lazily|Duplicate GPU detected|"
    r"Triton Error \[(?:CUDA|HIP)\]: (?!out of memory)|"
    # the same in the person's words: CUDA not available, the GPU not seen, the driver too old (English, Chinese)
    r"cuda\.is_available\(\)\W{0,3}\s*(?:returns?|returned|is|gives|gave|=+|->|prints?|still|always)\s*(?:still |always )?"
    r"False|\b(?:GPUs?|CUDA|the (?:graphics )?card)\b[^.!?\n]{0,20}?\b(?:is |are )?not (?:being )?(?:detected|found|"
    r"recogni[sz]ed|visible|available)\b(?! (?:error|warning))|"
    + _XID + r"\b|" + _GPU_LOST + r"|"
    r"(?:显卡)?驱动(?:版本)?(?:太低|太旧|过低|过旧|不匹配|不兼容)|(?:用不了|无法使用|不能用|检测不到|找不到|识别不到|识别不了)\s*"
    r"(?:cuda|CUDA|GPU|gpu|显卡)|(?:cuda|CUDA)\s*不可用"
)
"""CUDA that cannot start, in torch's and the driver's words (a regex alternation, no groups). Not bitsandbytes'
own kernels missing (`Error no kernel image ... at line 237 in file ...csrc/ops.cu`): that is its setup's."""
WORDS = ("driver", "nvidia", "kernel image", "ordinal", "cuda", "duplicate gpu", "nvml", "hip", "code object", "gfx",
         "gpu", "card", "xid", "fallen off", "ecc", "驱动", "显卡", "device function", "cudnn", "unable to load cu",
         "convolution algorithm", "ptx", "shared object", "compute capability")
"""Lowercase words one of the SETUP messages holds (`The NVIDIA driver on your system is too old` names no CUDA)."""

_FOUND = re.compile(r"found version (\d{4,5})")
_DRIVER = re.compile(r"driver on your system is too old|driver version is insufficient", re.I)
_NO_DRIVER = re.compile(r"Found no NVIDIA driver|NVIDIA-SMI has failed|no (?:CUDA|HIP) GPUs are available|NVML|"
                        r"driver initialization failed|is_available\(\)|not (?:being )?(?:detected|found|recogni[sz]ed|"
                        r"visible|available)|驱动|用不了|无法使用|不能用|检测不到|找不到|识别不|不可用|"
                        r"CUDA unknown error|cudaGetDeviceCount|CUDA initialization|failed lazily", re.I)
_NO_KERNELS = re.compile(r"sm_\d+ is not compatible|no kernel image|extension for compute capability|NoBinaryForGpu|"
                         r"code object for all current devices|"
                         r"invalid device function|TensileLibrary|GPU arch ?: ?gfx", re.I)
_ROCM = re.compile(r"\bHIP\b|hipError|code object|gfx\d", re.I)
_CPU_BUILD = re.compile(_CPU_ONLY, re.I)
_BUSY = re.compile(r"busy or unavailable", re.I)
_ORDINAL = re.compile(r"invalid device ordinal", re.I)
_DUPLICATE = re.compile(r"Duplicate GPU detected", re.I)
_FORKED = re.compile(r"Cannot re-initialize CUDA in forked subprocess", re.I)
_LIBRARY = re.compile(_LIBRARY_SAID, re.I)
_CONV_ALGO = re.compile(_CONV_ALGO_SAID, re.I)
_PTX_FEATURE = re.compile(r"\bptxas\b.{0,120}\berror\s*:.{0,40}requires \.target sm_\d+", re.I)
_PTX_TOOLCHAIN = re.compile(_PTX_TOOLCHAIN_SAID, re.I)
_PTXAS = re.compile(r"\bptxas\b", re.I)
_SM = re.compile(r"sm_(\d+)")
_EXTENSION = re.compile(r"compatible (?P<name>\w+) extension for compute capability (?P<cc>\d+)")


def driver_cuda(line: str) -> str:
    """The CUDA version a driver supports from torch's `found version 11060` (CUDA 11.6), else ''."""
    found = _FOUND.search(line)
    if found is None:
        return ""
    number = int(found.group(1))
    return f"{number // 1000}.{number % 1000 // 10}"


def setup_advice(f: Finding, line: str) -> Advice | None:
    """The advice for CUDA that cannot start, or None when the line is another CUDA error."""
    found = _advice_text(line)
    if found is None:
        return None
    title, evidence, cpu_build = found
    # a torch without CUDA asked for CUDA is the script's device choice or the install, not a CUDA fault (the
    # threads settle it by a device switch or a CUDA build): an error of the script's, in the corpus' terms; two
    # ranks on one GPU is NCCL's own failure (the launch's)
    advice_id = "exception" if cpu_build else "nccl_error" if _DUPLICATE.search(line) else "cuda_error"
    return Advice(advice_id, ERROR, title, [line] + evidence, {}, f.step)


_CHECK = "python -c \"import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())\" " \
         "and nvidia-smi show the build and the driver"
_STATED = (
    (_CPU_BUILD, "This torch has no CUDA (a CPU-only build, or a Mac) and the script asked for it: on a machine "
                 "with an NVIDIA GPU, install a CUDA build of torch (pytorch.org's pip command for your CUDA); "
                 "otherwise run on the CPU or MPS (device='cpu', CUDA calls gated on torch.cuda.is_available())",
     (_CHECK,)),
    (_BUSY, "CUDA error: the GPU is busy or unavailable: another process holds it in exclusive compute mode, or it "
            "is in a bad state", ("nvidia-smi shows the compute mode and the processes on it; nvidia-smi -c DEFAULT "
                                  "(as root) allows sharing", _CHECK)),
    (_ORDINAL, "CUDA error: a device index beyond the visible GPUs: check CUDA_VISIBLE_DEVICES and the device "
               "numbers the script asks for (cuda:N, --gpus, local_rank)",
     ("with CUDA_VISIBLE_DEVICES set, the visible GPUs are numbered from 0", _CHECK)),
    (_DUPLICATE, "NCCL error: two ranks use the same GPU (Duplicate GPU detected): give each rank its own "
                 "device (torch.cuda.set_device(local_rank) before init_process_group), launch no more processes "
                 "than GPUs", ("a device fixed in the script (cuda:0), or a CUDA_VISIBLE_DEVICES that lists fewer "
                               "GPUs than --nproc_per_node, puts every rank on one card",)),
    (_FORKED, "CUDA error: CUDA was used in a forked worker: keep CUDA out of the dataset and collate code, or use "
              "the 'spawn' start method", ("CUDA cannot be initialised again in a process forked after the parent "
                                           "used it (DataLoader workers, multiprocessing)",)),
    (_LIBRARY, "CUDA error: a CUDA library the framework loads (cuDNN, cuBLAS, cuSPARSE) is missing or older than "
               "the one it was built with: install the versions its build names (TensorFlow's and JAX's tested "
               "build tables; pip's nvidia-* wheels of those versions), or a framework build for the ones installed",
     ("an older system library found first on LD_LIBRARY_PATH (a conda or /usr/local/cuda one) shadows the matching "
      "one the same way", _CHECK)),
    (_CONV_ALGO, "CUDA error: cuDNN could not start (TensorFlow found no convolution algorithm): most often the card "
                 "had no memory left for it (TensorFlow takes it all at start: enable memory growth, "
                 "tf.config.experimental.set_memory_growth, or stop the other process), else a cuDNN that does not "
                 "match TensorFlow's build",
     ("the lines before it name the cuDNN loaded and the one TensorFlow was built with, where they differ", _CHECK)),
    (_PTX_FEATURE, "CUDA error: a kernel compiled at run time (Triton, XLA) uses an instruction this GPU lacks "
                   "(bf16 needs sm_80, Ampere or newer): run in fp16 or fp32 on this card, or on a newer one",
     ("ptxas names the feature and the GPU generation it needs", _CHECK)),
    (_PTX_TOOLCHAIN, "CUDA error: the driver is older than the CUDA compiler that built this code's PTX: update the "
                     "NVIDIA driver, or install the framework's build for the CUDA the driver supports",
     ("nvidia-smi's 'CUDA Version' is the newest CUDA the driver runs; a jaxlib or torch built for a newer one "
      "fails this way after an update", _CHECK)),
    (_PTXAS, "CUDA error: the CUDA compiler (ptxas) that JAX, XLA or Triton call at run time is missing or does not "
             "run: install the CUDA toolkit's compiler matching the framework (pip's nvidia-cuda-nvcc wheel, which "
             "jax[cuda12] brings), or put a matching ptxas on PATH",
     ("`which ptxas` and `ptxas --version` show the one found; an older system CUDA first on PATH is the usual "
      "cause", _CHECK)),
    (_NO_DRIVER, "CUDA error: CUDA could not start (no usable driver or GPU seen): check nvidia-smi, the driver and "
                 "CUDA_VISIBLE_DEVICES", ("a driver updated without a reboot, a container started without GPU "
                                          "access (--gpus all), or an empty CUDA_VISIBLE_DEVICES give the same",
                                          _CHECK)),
)
"""The failures whose message alone names the fix: (the message, the title, the evidence), checked in order (a
missing driver's words are the widest, so last)."""


def _advice_text(line: str) -> tuple[str, list[str], bool] | None:
    """The title and the evidence for CUDA that cannot start, and whether it is a torch with no CUDA at all; None
    when the line is another CUDA error."""
    if _DRIVER.search(line):
        return (*_old_driver(line), False)
    if _NO_KERNELS.search(line):
        return (*_no_kernels(line), False)
    return next(((title, list(evidence), pattern is _CPU_BUILD) for pattern, title, evidence in _STATED
                 if pattern.search(line)), None)


def _old_driver(line: str) -> tuple[str, list[str]]:
    """The driver older than torch's CUDA, with the CUDA it supports when the message says its version."""
    cuda = driver_cuda(line)
    level = f" (it supports CUDA {cuda})" if cuda else ""
    older = f"CUDA {cuda} or older" if cuda else "the CUDA the driver supports"
    return (f"CUDA error: the NVIDIA driver is older than this torch's CUDA{level}: update the driver, or "
            f"install a torch built for {older}",
            ["torch was built for a newer CUDA than the driver can run; no training setting changes that", _CHECK])


def _no_kernels(line: str) -> tuple[str, list[str]]:
    """No kernels for this GPU in the build: a ROCm build's gfx target, else a CUDA build's sm_ version."""
    if _ROCM.search(line):
        return ("CUDA error: this ROCm build has no kernels for this GPU's gfx architecture: install a torch/ROCm "
                "build that supports it (for a close consumer card, HSA_OVERRIDE_GFX_VERSION, e.g. 10.3.0 or 11.0.0)",
                ["rocminfo names the card's gfx target; the build lists the ones it was compiled for", _CHECK])
    extension = _EXTENSION.search(line)
    if extension:
        return (f"CUDA error: the {extension.group('name')} extension has no build for this GPU (compute capability "
                f"{extension.group('cc')}): rebuild it on this machine, with TCNN_CUDA_ARCHITECTURES (or "
                "TORCH_CUDA_ARCH_LIST) naming this card", ["an extension compiled on another machine, or for other "
                                                           "cards, holds kernels only for those", _CHECK])
    sm = _SM.search(line)
    gpu = f" (sm_{sm.group(1)})" if sm else ""
    return (f"CUDA error: this torch build has no kernels for this GPU{gpu}: install a torch built for its CUDA "
            "capability", ["a newer GPU needs a torch wheel for a newer CUDA (the cu12x wheels for Blackwell), "
                           "an old one a build that still lists its sm_ version", "a CUDA extension (apex, "
                           "flash-attn, xformers, mamba) built for another GPU fails the same way: rebuild it "
                           "here", _CHECK])


FAULT_HINTS = (
    (re.compile(_XID + r"|" + _GPU_LOST, re.I),
     "the GPU itself failed (the driver's Xid report: off the PCIe bus, an ECC fault): check dmesg, power and "
     "cooling, reset the GPU (nvidia-smi -r) or have the card replaced; no setting in the run fixes it"),
    (re.compile(r"HW Exception by GPU.{0,120}GPU Hang", re.I),
     "the GPU hung under ROCm (its runtime's HW Exception): check dmesg for the amdgpu reset, and run a ROCm and "
     "driver pair AMD lists together for this card; a kernel of the run (a custom or compiled one) can hang it too"),
    (re.compile(r"Memory access fault by GPU", re.I),
     "a kernel touched memory it does not own (ROCm's page fault, the AMD side of an illegal memory access): "
     "AMD_SERIALIZE_KERNEL=3 finds the op; a card run as another gfx target (HSA_OVERRIDE_GFX_VERSION) can fault "
     "this way too"),
    (re.compile(r"CUBLAS_STATUS_NOT_SUPPORTED.{0,400}CUDA_R_16BF|\bbf(?:loat)?16\b.{0,80}not supported", re.I),
     "this GPU has no bfloat16 matmuls (bf16 needs Ampere or newer): train in fp16 or fp32 instead of bf16"),
    (re.compile(r"input_val >= zero && input_val <= one"),
     "a BCELoss input is outside [0, 1]: give logits to BCEWithLogitsLoss, or apply sigmoid first"),
    (re.compile(r"index out of bounds|index >= -sizes\[i\]"),
     "an index is beyond a tensor's size: token ids beyond the vocabulary (resize the embeddings after adding "
     "tokens) or positions beyond max_position_embeddings (truncate to the model's max length)"),
    # the embedding lookup's kernel, named before the assertion that a long line may lose
    (re.compile(r"indexSelect(?:Large|Small)Index|srcIndex < srcSelectDimSize"),
     "a token id is outside the embedding table: resize the embeddings after adding tokens, or use the model's own "
     "tokenizer"),
    (re.compile(r"CUBLAS_STATUS_NOT_INITIALIZED|CUDNN_STATUS_NOT_INITIALIZED|Library cublas(?:Lt)? is not initialized"),
     "cuBLAS/cuDNN could not start: most often the card had no memory left for their handles (another process, "
     "or a batch at the edge), else a torch whose CUDA libraries do not match"),
    (re.compile(r"CUDNN_STATUS_NOT_SUPPORTED"),
     "cuDNN has no algorithm for this convolution's shape or dtype: try torch.backends.cudnn.benchmark = True and "
     "a contiguous input, or update torch (2.3.0's cuDNN v8 plans failed this way)"),
    (re.compile(r"device-side assert", re.I),
     "a device-side assert, most often an id out of range (token ids beyond the embedding table, labels outside "
     "the classes and not -100)"),
)
"""What a CUDA fault's own words say went wrong, beyond rerunning with CUDA_LAUNCH_BLOCKING=1 (most specific
first)."""


ROCM_FAULT = re.compile(r"\bHIP error\b|hipError|by GPU node-?\d|HSA_STATUS_ERROR|AMD_SERIALIZE_KERNEL")
"""A fault in ROCm's words: HIP's errors and its runtime's (HSA). Their debugging switch is AMD_SERIALIZE_KERNEL=3
(what torch's ROCm build says after every HIP error), not CUDA_LAUNCH_BLOCKING."""


def fault_hint(line: str) -> str:
    """The cause a CUDA fault's line names ('' when it names none)."""
    return next((hint for pattern, hint in FAULT_HINTS if pattern.search(line)), "")
