"""Issue 23: the doctor reads failures in every dialect people paste, not only the corpus's excerpts.

Each test is built from a pattern (the quoted lines come from dev-split records of tests/data/real, with their
source), and the variants around it that a maintainer would read the same way: an OOM's phase from any
traceback dialect and from the status lines and progress bars printed before it, the OOM's kind from the
numbers of every PyTorch era.
"""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream
from loratui.logic import oom, tracebacks
from loratui.logic.text_reader import TextReader, dialect, values


def first_id(text: str) -> str:
    """The id of the doctor's first item for a pasted text ('' when it finds nothing)."""
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return items[0].id if items else ""


NEW_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
           "79.15 GiB of which 1.05 GiB is free. Including non-PyTorch memory, this process has 78.08 GiB memory in "
           "use. Of the allocated memory 77.21 GiB is allocated by PyTorch, and 0.10 GiB is reserved by PyTorch but "
           "unallocated.")
BARE_OOM = "torch.cuda.OutOfMemoryError: CUDA out of memory."


# -- the OOM's wording and numbers ---------------------------------------------------------------------


@pytest.mark.parametrize("line", [
    # Lua Torch and PyTorch 0.x (https://github.com/facebookarchive/loop/issues/57)
    "THCudaCheck FAIL file=/pytorch/aten/src/THC/generic/THCStorage.cu line=58 error=2 : out of memory",
    "RuntimeError: cuda runtime error (2) : out of memory at /pytorch/aten/src/THC/THCCachingAllocator.cpp:510",
    "[rank3]: RuntimeError: CUDA error: out of memory",
    "RuntimeError: Triton Error [CUDA]: CUDA_ERROR_OUT_OF_MEMORY",
])
def test_every_era_of_oom_wording_is_an_oom(line: str) -> None:
    assert oom.is_oom_line(line)


@pytest.mark.parametrize("line", [
    "MemoryError: out of memory",  # the host, not the GPU
    "RuntimeError: [enforce fail at alloc_cpu.cpp:114] DefaultCPUAllocator: can't allocate memory: you tried",
    "the GPU has 24 GiB of memory",
])
def test_host_memory_and_prose_are_not_cuda_ooms(line: str) -> None:
    assert not oom.is_oom_line(line)


def test_a_process_count_below_pytorchs_own_is_blind() -> None:
    """Inside a container the driver cannot see the process: "this process has 0 bytes" beside 62 GiB that
    PyTorch reserved. The reserved memory counts as this process's, so the neighbour is what is left."""
    line = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of "
            "79.10 GiB of which 400.00 MiB is free. Including non-PyTorch memory, this process has 0 bytes memory in "
            "use. Of the allocated memory 60.00 GiB is allocated by PyTorch, and 2.00 GiB is reserved by PyTorch but "
            "unallocated.")
    report = oom.parse_oom(line)
    assert report is not None and report.process_used is None and "container" in report.note
    assert report.other_used is not None and abs(report.other_used / 2**30 - 16.71) < 0.01
    items, _ = diagnose_stream(io.BytesIO(line.encode()), "pasted")
    assert "16.71 GiB" in items[0].title


def test_free_memory_beyond_the_request_is_not_a_full_card() -> None:
    """2.35 GiB free on the card and a 20 MiB request failed: the memory was there, not in one piece
    (https://github.com/jhc13/taggui/issues/188, which runs with expandable_segments)."""
    line = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total "
            "capacity of 4.00 GiB of which 2.35 GiB is free. Of the allocated memory 825.15 MiB is allocated by "
            "PyTorch, and 24.85 MiB is reserved by PyTorch but unallocated.")
    report = oom.parse_oom(line)
    assert report is not None and report.kind == oom.FRAGMENTATION
    assert first_id(line) == "oom_fragmentation"


@pytest.mark.parametrize(("free", "allocated", "kind"), [("1.05 GiB", "77.21 GiB", oom.FULL),
                                                          ("60.00 GiB", "17.21 GiB", oom.FRAGMENTATION)])
def test_free_memory_decides_against_a_full_card(free: str, allocated: str, kind: str) -> None:
    """The same request and unused cache; the card is full only when it has no free memory for the request."""
    line = (f"CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which "
            f"{free} is free. Of the allocated memory {allocated} is allocated by PyTorch, and 0.10 GiB is reserved "
            "by PyTorch but unallocated.")
    report = oom.parse_oom(line)
    assert report is not None and report.kind == kind


# -- the phase from the traceback, in any dialect ------------------------------------------------------


def test_the_call_on_a_cut_frames_line_names_the_phase() -> None:
    """The traceback is cut before the evaluate frame, but main's current line calls it
    (https://github.com/facebookarchive/loop/issues/57)."""
    text = "\n".join([
        "THCudaCheck FAIL file=/pytorch/aten/src/THC/generic/THCStorage.cu line=58 error=2 : out of memory",
        "Traceback (most recent call last):",
        '  File "train.py", line 211, in <module>',
        "    main()",
        '  File "train.py", line 200, in main',
        "    eval_loss = evaluate(model, criterion, epoch, eval_losses)"])
    assert first_id(text) == "oom_at_eval"
    assert first_id(text.replace("eval_loss = evaluate(", "loss = train_epoch(")) == "oom_full"


def test_rank_prefixed_code_lines_are_read_too() -> None:
    scanner = tracebacks.TraceScanner()
    for line in ["[rank7]: Traceback (most recent call last):",
                 '[rank7]:   File "/fsx/pretrain.py", line 729, in main',
                 "[rank7]:     FSDPCheckpoint.fsdp_save_ckpt("]:
        scanner.line(line)
    assert scanner.frames[-1].call == "fsdp_save_ckpt" and scanner.phase == "save"


def test_ipython_arrows_and_cells_name_the_phase() -> None:
    """Colab's old IPython traceback: the cell calls push_to_hub_gguf, whose frames are folded away
    (`3 frames`), and the innermost shown is unsloth's _merge_lora
    (https://github.com/unslothai/unsloth/issues/2193)."""
    text = "\n".join([
        "OutOfMemoryError                          Traceback (most recent call last)",
        "[<ipython-input-9-ccd214168cfa>](https://localhost:8080/#) in <cell line: 0>()",
        "      2 if True:",
        "----> 3     model.push_to_hub_gguf(",
        "      4         \"AlSamCur123/NemoFineTune\",",
        "",
        "3 frames",
        "[/usr/local/lib/python3.11/dist-packages/unsloth/save.py](https://localhost:8080/#) in _merge_lora(layer, "
        "name)",
        "--> 177             maximum_element = torch.max(W.min().abs(), W.max())",
        "",
        "OutOfMemoryError: CUDA out of memory. Tried to allocate 140.00 MiB. GPU 0 has a total capacity of 14.74 "
        "GiB of which 48.12 MiB is free."])
    assert first_id(text) == "oom_at_save"


def test_rich_tracebacks_are_read() -> None:
    """rich's boxed traceback (accelerate, typer, many CLIs) with the current line behind its ❱."""
    text = "\n".join([
        "╭───────────────────── Traceback (most recent call last) ──────────────────────╮",
        "│ /home/user/train.py:120 in <module>                                          │",
        "│                                                                              │",
        "│   117 │   trainer.train()                                                    │",
        "│ ❱ 120 │   metrics = trainer.evaluate()                                       │",
        "│                                                                              │",
        "│ /usr/lib/python3.10/site-packages/torch/nn/modules/module.py:1518 in         │",
        "╰──────────────────────────────────────────────────────────────────────────────╯",
        NEW_OOM])
    assert first_id(text) == "oom_at_eval"
    scanner = tracebacks.TraceScanner()
    for line in text.splitlines()[:5]:
        scanner.line(line)
    assert [(f.path, f.func, f.call) for f in scanner.frames] == [("/home/user/train.py", "<module>", "evaluate")]


def test_loguru_tracebacks_are_read() -> None:
    """loguru marks the failing frame with `>` and prints each variable's value under the code line."""
    text = "\n".join([
        "Traceback (most recent call last):",
        '> File "/app/train.py", line 52, in <module>',
        "    save_merged(model)",
        "    │           └ PeftModelForCausalLM(",
        '  File "/app/train.py", line 31, in save_merged',
        "    merged = model.merge_and_unload()",
        NEW_OOM])
    assert first_id(text) == "oom_at_save"


def test_jupyter_cell_frames_carry_their_arrow_call() -> None:
    scanner = tracebacks.TraceScanner()
    for line in ["---------------------------------------------------------------------------",
                 "OutOfMemoryError                          Traceback (most recent call last)",
                 "Cell In[12], line 3", "      1 metrics = None", "----> 3 metrics = trainer.evaluate()", ""]:
        scanner.line(line)
    assert [(f.func, f.call) for f in scanner.frames] == [("<cell>", "evaluate")] and scanner.phase == "eval"


@pytest.mark.parametrize(("func", "phase"), [
    ("merge_and_unload", "save"), ("_merge_lora", "save"), ("push_to_hub", "save"),
    ("save_pretrained_gguf", "save"), ("_save_checkpoint", "save"), ("_merge_heads", ""), ("nested_concat", "eval"), ("compute_metrics", "eval"),
    ("preprocess_logits_for_metrics", "eval"),
    ("_full_pre_state_dict_hook", "save"), ("get_peft_model_state_dict", "save"), ("load_state_dict", "load"),
    ("_load_state_dict_into_meta_model", "load"), ("val_epoch", "eval"), ("valid_step", "eval"), ("_run_sanity_check", "eval"), ("runTest", "eval"),
    ("log_interval", ""), ("infer_auto_device_map", ""), ("interval_step", ""),
])
def test_frame_names_and_their_phase(func: str, phase: str) -> None:
    assert tracebacks.frame_phase(tracebacks.Frame("/site-packages/x/y.py", func)) == phase


# -- the phase from what was printed before ------------------------------------------------------------


@pytest.mark.parametrize(("before", "expected"), [
    # unsloth's status lines before saving (https://github.com/unslothai/unsloth/issues/2193)
    (["Unsloth: Merging 4bit and LoRA weights to 16bit...", "Unsloth: Saving model... This might take 5 minutes ..."],
     "oom_at_save"),
    (["***** Running Evaluation *****", "  Num examples = 500"], "oom_at_eval"),
    (["2024-05-01 10:00:01 - INFO - Start evaluating on the test set"], "oom_at_eval"),
    # a progress bar that names validation, the OOM glued to it (https://github.com/facebookarchive/loop/issues/57)
    (["Valid (loss 53.34) epoch 1:   9%|██▍                   | 1/11 [00:01<00:13,  1.33s/it]" + BARE_OOM], "oom_at_eval"),
    (["Validation DataLoader 0:  45%|████▌     | 9/20 [00:03<00:04,  2.61it/s]"], "oom_at_eval"),
    # the training bar's loss before it is a log the reader hands on late: it must not end the validation
    (["Epoch 0: 100%|██████████| 500/500 [10:00<00:00, 1.2it/s, loss=1.23, v_num=1]",
      "Validation:   0%|          | 0/50 [00:00<?, ?it/s]"], "oom_at_eval"),
    (["Sanity Checking DataLoader 0:   0%|          | 0/2 [00:00<?, ?it/s]"], "oom_at_eval"),
    # validation finished and training went on: the OOM is a training step's
    (["Validation DataLoader 0: 100%|██████████| 20/20 [00:07<00:00,  2.61it/s]",
      "Epoch 1:  12%|█▏        | 12/100 [00:09<01:10,  1.25it/s, loss=2.31]"], "oom_full"),
    # a dataset's save and a phase's results are no status of the run
    (["Saving the dataset (1/1 shards): 100%|██████████| 52002/52002 [00:00<00:00, 610320.62 examples/s]"],
     "oom_full"),
    (["Evaluation results: eval_loss = 1.23"], "oom_full"),
    (["Training completed. Do not forget to share your model on huggingface.co/models =)"], "oom_full"),
    # the newest status on a line is its last (axolotl)
    (["[axolotl.train.train:173] [PID:1234] [RANK:0] Training Completed!!! Saving pre-trained model to ./out"],
     "oom_at_save"),
    # the command run exports or merges (https://github.com/hiyouga/LlamaFactory/issues/3277)
    (["`CUDA_VISIBLE_DEVICES=0 python src/export_model.py     --model_name_or_path /models/Qwen-14B-Chat "
      "--adapter_name_or_path saves/lora/checkpoint-1000 --export_dir /models/merged"], "oom_at_save"),
    (["$ llamafactory-cli export examples/merge_lora/llama3_lora_sft.yaml"], "oom_at_save"),
    (["python -m axolotl.cli.merge_lora config.yml --lora_model_dir=./out"], "oom_at_save"),
    (["python train.py --do_export false --merge_weights_every 0"], "oom_full"),
    (["***** Running Evaluation *****", "{'loss': 1.2, 'grad_norm': 0.5, 'learning_rate': 1e-05, 'epoch': 0.5}"],
     "oom_full"),
])
def test_status_lines_and_bars_before_the_oom(before: list[str], expected: str) -> None:
    assert first_id("\n".join(before + [BARE_OOM])) == expected


def test_the_users_words_in_chinese() -> None:
    """'training starts fine, but at the first starting evaluation it reports a cuda memory error'
    (https://github.com/ChenHongruixuan/ChangeMamba/issues/37)."""
    text = ("类似的问题，训练一开始是正常的，但是在首次starting evaluation时报cuda内存错误，调整batchsize没有效果。\n"
            "CUDA out of memory. Tried to allocate 24.00 MiB (GPU 0; 11.76 GiB total capacity; 10.47 GiB already "
            "allocated; 33.62 MiB free; 10.49 GiB reserved in total by PyTorch)")
    assert first_id(text) == "oom_at_eval"
    assert first_id(text.replace("starting evaluation", "训练")) == "oom_full"


def test_an_oom_in_compute_metrics_is_the_evaluations() -> None:
    text = "\n".join([
        "Traceback (most recent call last):",
        '  File "/content/train.py", line 88, in <module>',
        "    main()",
        '  File "/content/train.py", line 70, in main',
        "    scores = compute_metrics(outputs)",
        '  File "/content/train.py", line 40, in compute_metrics',
        "    logits = torch.tensor(eval_pred.predictions).cuda().softmax(-1)",
        NEW_OOM])
    assert first_id(text) == "oom_at_eval"


# -- setup messages in every version's words -----------------------------------------------------------


@pytest.mark.parametrize("line", [
    # bitsandbytes 0.38 on Windows loaded its CPU binary
    # (https://github.com/bitsandbytes-foundation/bitsandbytes/issues/558)
    r"bin C:\Users\apb\llm\Lib\site-packages\bitsandbytes\libbitsandbytes_cpu.so",
    "UserWarning: The installed version of bitsandbytes was compiled without GPU support. 8-bit optimizers, 8-bit "
    "multiplication, and GPU quantization are unavailable.",
    "RuntimeError: Configured ROCm binary not found at /opt/venv/lib/python3.10/site-packages/bitsandbytes/"
    "libbitsandbytes_rocm62.so",
    "Could not find module 'C:\\Python310\\lib\\site-packages\\bitsandbytes\\libbitsandbytes_cuda121.dll'",
    "Could not load bitsandbytes native library: libcusparse.so.11: cannot open shared object file: No such file",
    "CUDA SETUP: Something unexpected happened. Please compile from source:",
    "AttributeError: 'NoneType' object has no attribute 'cquantize_blockwise_fp16_nf4'",
])
def test_bitsandbytes_that_cannot_load_is_setup(line: str) -> None:
    assert first_id(line) == "bnb_setup"


@pytest.mark.parametrize("line", [
    # a healthy Colab start with bitsandbytes 0.39: the path warnings and the backup search that succeeds
    "/usr/local/lib/python3.10/dist-packages/bitsandbytes/cuda_setup/main.py:149: UserWarning: WARNING: The following "
    "directories listed in your path were found to be non-existent: {PosixPath('/sys/fs/cgroup/memory.events')}",
    "CUDA_SETUP: WARNING! libcudart.so not found in any environmental path. Searching in backup paths...",
    "CUDA SETUP: Loading binary /usr/local/lib/python3.10/dist-packages/bitsandbytes/libbitsandbytes_cuda118.so...",
    "Successfully installed bitsandbytes-0.41.1",
    # a healthy CPU run with transformers 5: optional kernels, not bitsandbytes' setup
    "Failed to load CPU gemm_4bit_forward from kernels-community: Kernel repository "
    "'kernels-community/quantization-bitsandbytes' could not verify publisher trust status.",
])
def test_bitsandbytes_at_work_is_not_a_setup_failure(line: str) -> None:
    assert first_id(line) != "bnb_setup"


@pytest.mark.parametrize("line", [
    " WARNING - llmtuner.model.patcher - FlashAttention2 is not installed.",  # hiyouga/LlamaFactory#3171
    "ValueError: SiglipVisionModel does not support Flash Attention 2.0 yet.",  # QQ-MM/Video-CCAM#8
    "ImportError: DLL load failed while importing flash_attn_2_cuda: The specified procedure could not be found.",
    "NameError: name 'flash_attn_varlen_func' is not defined",  # imoneoi/openchat#52
    "ImportError: flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi",
    "RuntimeError: FlashAttention only supports Ampere GPUs or newer.",
    "RuntimeError: FlashAttention is only supported on CUDA 11.7 and above.",  # its setup.py's check of nvcc
])
def test_flash_attention_that_cannot_be_used(line: str) -> None:
    assert first_id(line) == "flash_attn_unavailable"


@pytest.mark.parametrize("line", [
    "Flash Attention 2.0 only supports torch.float16 and torch.bfloat16 dtypes, but the current dype in "
    "Qwen2ForCausalLM is torch.float32. You should run training or inference using Automatic Mixed-Precision",
    "You are attempting to use Flash Attention 2.0 with a model not initialized on GPU. Make sure to move the model "
    "to GPU after initializing it on CPU with `model.to('cuda')`.",
])
def test_flash_attention_notes_at_a_healthy_load(line: str) -> None:
    assert first_id(line) == ""


def test_flash_attention_in_use_is_no_finding() -> None:
    assert first_id("Using flash_attention_2 for the attention implementation\n"
                    "{'loss': 1.2, 'grad_norm': 0.5, 'learning_rate': 1e-05, 'epoch': 0.5}") == ""


# -- distributed timeouts and CUDA errors ----------------------------------------------------------------


@pytest.mark.parametrize("line", [
    # the rendezvous store, while rank 0 tokenises (hiyouga/LlamaFactory#81, axolotl-ai-cloud/axolotl#2684)
    "setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d key-value store by key '0', but "
    "store->get('0') got error: Socket Timeout",
    "[rank1]:[W516 14:34:56.854597329 socket.cpp:489] [c10d] waitForInput: socket SocketImpl(fd=79, "
    "addr=[localhost]:41170, remote=[localhost]:29500) timed out after 1800000ms",
    "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 1/2 clients joined.",
    "RuntimeError: Timed out initializing process group in store based barrier on rank: 0, for key: store_based_barrier",
    "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=1800000)",
])
def test_distributed_timeouts_in_any_layer(line: str) -> None:
    assert first_id(line) == "nccl_timeout"


@pytest.mark.parametrize("line", [
    "TrainingArguments(ddp_backend=nccl, ddp_timeout=1800, output_dir=out)",
    "[W socket.cpp:663] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 97).",
    # a healthy DDP start prints its settings
    "[I ProcessGroupNCCL.cpp:686] [Rank 0] ProcessGroupNCCL initialization options: NCCL_ASYNC_ERROR_HANDLING: 1, "
    "NCCL_DESYNC_DEBUG: 0, NCCL_ENABLE_TIMING: 0, NCCL_BLOCKING_WAIT: 0, TIMEOUT(ms): 1800000",
    "node1:1234:1234 [0] NCCL INFO NCCL_IB_TIMEOUT set by environment to 22.",
    "Initializing process group with timeout: 1800 seconds",
])
def test_timeout_settings_are_no_timeout(line: str) -> None:
    assert first_id(line) != "nccl_timeout"


@pytest.mark.parametrize("line", [
    # NCCL's watchdog reporting a device-side assert: the assert is the cause, not a timeout
    "terminate called after throwing an instance of 'c10::DistBackendError' what():  [Rank 1] Process group "
    "watchdog thread terminated with exception: CUDA error: device-side assert triggered",
    "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, m, n, k)`",
    "RuntimeError: cuDNN error: CUDNN_STATUS_MAPPING_ERROR",
    "RuntimeError: CUDA driver error: invalid argument",
    "RuntimeError: Triton Error [CUDA]: cudaErrorLaunchFailure",
    "RuntimeError: CUDA_ERROR_ILLEGAL_ADDRESS in cuLaunchKernel",
    "RuntimeError: HIP error: invalid device function",  # torch on ROCm
])
def test_cuda_errors_under_other_wrappers(line: str) -> None:
    assert first_id(line) == "cuda_error"


# -- loss lines in more frameworks' layouts --------------------------------------------------------------


@pytest.mark.parametrize(("line", "expected"), [
    # LitGPT (https://github.com/Lightning-AI/litgpt/issues/689)
    ("iter 77 step 39: loss 10.8259, iter time: 214.40ms (optimizer.step)", (39, 10.8259)),
    ("| epoch 001 | loss 7.312 | ppl 158.9 | wps 11235", (None, 7.312)),
    ("step 12 train loss nan", (12, float("nan"))),
    ("Epoch 3 step 40 loss: tensor(2.3456, device='cuda:0', grad_fn=<NllLossBackward0>)", (40, 2.3456)),
])
def test_a_loss_with_only_a_space_before_its_value(line: str, expected: tuple[int | None, float]) -> None:
    found = values.loss_line(line)
    assert found is not None and found[0] == expected[0]
    loss = found[1]["loss"]
    assert loss == expected[1] or (loss != loss and expected[1] != expected[1])


@pytest.mark.parametrize("line", ["the loss 2 times higher than before", "loss function: cross entropy"])
def test_prose_about_the_loss_has_no_value(line: str) -> None:
    assert values.loss_line(line) is None


def test_a_litgpt_loss_that_never_moves_is_flat() -> None:
    text = "\n".join(f"iter {i} step {i // 2}: loss 10.8259, iter time: {197 + i % 3}.87ms" for i in range(60, 100))
    assert first_id(text) == "loss_flat"


# -- a NaN in the words of the tools that watch for one ---------------------------------------------------


@pytest.mark.parametrize("line", [
    "RuntimeError: Function 'LogSoftmaxBackward0' returned nan values in its 0th output.",
    "WARNING:root:NaN or Inf found in input tensor.",
    "Detected inf or nan values in the gradients, skipping this step",
    "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding.",
    "epoch 0 iter 120 loss: tensor(nan, device='cuda:0', grad_fn=<NllLossBackward0>)",
    "WARNING: NaN detected in logits at step 512",
    "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0",
    " iteration      120/   1000 | lm loss: 2.31E+00 | loss scale: 1.0 | number of skipped iterations:   0 | "
    "number of nan iterations:   3 |",
])
def test_nan_in_the_watchers_words(line: str) -> None:
    assert first_id(line) == "nan_loss"


def test_a_check_for_nan_is_no_nan() -> None:
    assert first_id("anomaly detection on: checking for nan values in the gradients after each step") == ""


def test_no_nan_iterations_is_no_nan() -> None:
    assert first_id(" iteration        9/      10 | lm loss: 2.31E+00 | number of skipped iterations:   0 | "
                    "number of nan iterations:   0 |") == ""


def test_a_rise_that_ran_into_nan_is_divergence_in_every_layout() -> None:
    """A rise then NaN: the divergence explains the NaN, whether the NaN is read from the log's values or from
    the printed line (`train loss:nan`), so no separate NaN item leads."""
    losses = [2.0, 1.8, 1.6, 1.5, 1.45, 1.5, 1.6, 1.75, 1.9, 2.1, 2.3, 2.5]
    text = "\n".join(f"2024-01-01 10:00:{i:02d}:INFO: step {i + 1} train loss:{loss}" for i, loss in enumerate(losses))
    items, _ = diagnose_stream(io.BytesIO((text + "\nstep 13 train loss:nan\nstep 14 train loss:nan").encode()), "x")
    assert [item.id for item in items] == ["loss_diverging"] and items[0].severity == "error"
    assert any("became nan at step 13" in line for line in items[0].evidence)


# -- the same traceback under a logger's prefix or indented as a block ----------------------------------

PLAIN = ["Traceback (most recent call last):",
         '  File "/app/train.py", line 88, in <module>',
         "    main()",
         '  File "/app/train.py", line 70, in main',
         "    raise ValueError(msg)",
         '  File "/usr/lib/python3.10/site-packages/transformers/trainer.py", line 3011, in evaluate',
         "    output = eval_loop(",
         "ValueError: the batch has no labels"]


@pytest.mark.parametrize("prefix", ["worker-1: ", "[1,0]<stderr>:", "2024-05-01 12:00:00 | ", "0: ", "    "])
def test_a_prefixed_or_indented_traceback_reads_as_a_plain_one(prefix: str) -> None:
    """pdsh's `worker-1: `, mpirun's `[1,0]<stderr>:`, a timestamp, srun -l's `0: `, a Markdown block's
    indentation: the frames, their calls and the exception are the same as without it."""
    scanner = tracebacks.TraceScanner()
    for number, line in enumerate(PLAIN):
        scanner.line(prefix.replace("1", str(number % 3)) + line if prefix.strip() else prefix + line)
    raised = scanner.chosen
    assert raised is not None and raised.type == "ValueError" and raised.message == "the batch has no labels"
    assert [f.func for f in raised.frames] == ["<module>", "main", "evaluate"] and raised.phase == "eval"


def test_a_code_line_that_raises_is_not_the_exception() -> None:
    scanner = tracebacks.TraceScanner()
    for line in PLAIN[:5] + ["    raise ValueError", "ValueError: the batch has no labels"]:
        scanner.line("worker-0: " + line)
    assert scanner.chosen is not None and scanner.chosen.message == "the batch has no labels"


def test_a_notebook_traceback_under_a_timestamp() -> None:
    """A notebook's traceback copied from a log viewer that stamps every line: IPython's frames are anchored to
    the line's start, so they are read once the stamp is taken off."""
    lines = ["OutOfMemoryError                          Traceback (most recent call last)",
             "<ipython-input-3-0f1e> in <cell line: 1>()", "----> 1 trainer.predict(test)", "",
             "/usr/lib/python3.10/dist-packages/transformers/trainer.py in evaluation_loop(self, dataloader)",
             "---> 88     logits = nested_concat(all_logits, logits)", BARE_OOM]
    text = "\n".join(f"2024-05-01 12:00:{n:02d} | {line}" for n, line in enumerate(lines))
    assert first_id(text) == "oom_at_eval"



def test_a_nan_in_the_evaluation_only() -> None:
    text = "\n".join(["{'loss': 1.52, 'grad_norm': 0.61, 'learning_rate': 2e-05, 'epoch': 0.5}",
                      "{'eval_loss': nan, 'eval_runtime': 12.1, 'eval_samples_per_second': 41.2, 'epoch': 0.5}",
                      "{'loss': 1.48, 'grad_norm': 0.58, 'learning_rate': 2e-05, 'epoch': 0.6}"])
    items, _ = diagnose_stream(io.BytesIO(text.encode()), "x")
    assert items[0].id == "nan_loss" and items[0].title.startswith("eval_loss became nan")
    assert first_id(text.replace("'eval_loss': nan", "'eval_loss': 1.61")) == ""



@pytest.mark.parametrize("bar", [
    "Map (num_proc=4):   3%|▎         | 3000/100000 [05:12<2:48:12, 3.21s/ba]",
    "Running tokenizer on dataset:  12%|█▏        | 120/1000 [10:00<1:13:20, 5.00s/it]",
])
def test_a_crawling_preprocessing_bar_prints_its_rate_inverted(bar: str) -> None:
    assert first_id(bar) == "data_starved"


def test_a_slow_training_bar_is_no_preprocessing() -> None:
    assert first_id(" 12%|█▏        | 120/1000 [10:00<1:13:20, 5.00s/it]") == ""



@pytest.mark.parametrize(("line", "expected"), [
    ("[0] NVIDIA A100-SXM4-80GB | 34°C,   2 % | 30563 / 81920 MB | user(30560M)", "data_starved"),
    ("[0] NVIDIA A100-SXM4-80GB | 61°C,  98 % | 30563 / 81920 MB | user(30560M)", ""),
    ("[1] NVIDIA A100-SXM4-80GB | 30°C,   0 % |     4 / 81920 MB |", ""),  # an empty card is no starved one
])
def test_gpustat_shows_an_idle_gpu(line: str, expected: str) -> None:
    assert first_id(line) == expected



def test_a_learning_rate_of_zero_trains_nothing() -> None:
    """A noisy loss (no flat test fires) with the learning rate logged as 0 in every log."""
    losses = [2.31, 2.22, 2.38, 2.27, 2.35, 2.24, 2.30]
    logs = [f"{{'loss': {loss}, 'learning_rate': {lr}, 'epoch': {0.01 * (n + 1):.2f}}}"
            for n, (loss, lr) in enumerate(zip(losses, ["0.0"] * 7))]
    items, _ = diagnose_stream(io.BytesIO("\n".join(logs).encode()), "x")
    assert items[0].id == "loss_flat" and "learning_rate is 0" in items[0].title
    warm = [log.replace("'learning_rate': 0.0", "'learning_rate': 0.0" if n == 0 else "'learning_rate': 2e-05")
            for n, log in enumerate(logs)]  # a warm-up's first log at 0 is no finding
    assert first_id("\n".join(warm)) == ""


TRAIN_BAR = " 10%|█         | {n}/1000 [01:40<15:00,  1.00it/s]"
EVAL_BAR = " 40%|████      | 20/50 [00:04<00:06,  5.00it/s]"
TRAIN_LOG = "{'loss': 1.52, 'grad_norm': 0.61, 'learning_rate': 2e-05, 'epoch': 0.1}"


@pytest.mark.parametrize(("lines", "expected"), [
    # the Trainer's eval bar has no description: a bar of another total inside training is the evaluation
    ([TRAIN_BAR.format(n=99), TRAIN_BAR.format(n=100), TRAIN_LOG, TRAIN_BAR.format(n=100), EVAL_BAR], "oom_at_eval"),
    # the training bar drawn again: back in training
    ([TRAIN_BAR.format(n=100), TRAIN_LOG, EVAL_BAR, TRAIN_BAR.format(n=101)], "oom_full"),
    # no training log named the training bar: a smaller loop drawn inside the unfinished bar is still a loop inside
    # training (issue 23, tests/test_oom_battery.py); a larger one inside it (an epoch bar, then the steps' bar) is not
    ([TRAIN_BAR.format(n=100), EVAL_BAR], "oom_at_eval"),
    (["  0%|          | 0/3 [00:00<?, ?it/s]", TRAIN_BAR.format(n=100)], "oom_full"),
])
def test_a_second_bar_inside_training_is_the_evaluation(lines: list[str], expected: str) -> None:
    assert first_id("\n".join(lines + [BARE_OOM])) == expected


# -- a frame whose start the paste cut off ----------------------------------------------------------------


@pytest.mark.parametrize("head", ['  File "', "", "$MYPATH/", "ges/"])
def test_a_frame_cut_at_its_start_still_places_the_exception(head: str) -> None:
    """A selection that begins mid-line keeps `...main.py", line 153, in f` (the pattern of
    https://github.com/tloen/llama-int8/issues/15, a dev record): the frame still says bitsandbytes' setup raised."""
    site = "" if head == "ges/" else "/home/u/venv/lib/python3.10/site-packages/"
    text = (f'{head}{site}bitsandbytes/cuda_setup/main.py", line 153, in is_cublasLt_compatible\n'
            '    cuda_setup.add_log_entry("WARNING: Compute capability < 7.5 detected!", is_warning=True)\n'
            "\n"
            "NameError: name 'cuda_setup' is not defined. Did you mean: 'CUDASetup'?\n")
    assert first_id(text) == "bnb_setup"


def test_a_cut_frame_gives_the_oom_its_phase() -> None:
    text = ('/opt/conda/lib/python3.10/site-packages/transformers/trainer.py", line 2380, in _save_checkpoint\n'
            "    torch.save(self.optimizer.state_dict(), os.path.join(output_dir, OPTIMIZER_NAME))\n"
            + NEW_OOM + "\n")
    assert first_id(text) == "oom_at_save"


def test_a_sentence_that_names_a_file_is_no_frame() -> None:
    scanner = tracebacks.TraceScanner()
    scanner.line('I ran "train.py", line 3, in my notes')
    assert not scanner.frames


@pytest.mark.parametrize(("line", "asked"), [
    ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8589934592 "
     "bytes.", 8 << 30),
    ("tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with "
     "shape[32,512,512,64] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
     2 << 30),
    ("2019-05-01 10:00:00 W tensorflow/core/common_runtime/bfc_allocator.cc:267] Allocator (GPU_0_bfc) ran out of "
     "memory trying to allocate 1.50GiB.", 3 << 29),
    ("E rocm_driver.cc:601] failed to allocate 7.35G (7889485824 bytes) from device: hipErrorOutOfMemory",
     7889485824),
])
def test_the_size_asked_for_is_read_in_every_framework(line: str, asked: int) -> None:
    """XLA's bytes, TensorFlow's tensor shape and type, its allocator's and ROCm's sizes: the advice quotes the
    request instead of saying the message gives no numbers."""
    report = oom.parse_oom(line)
    assert report is not None and report.requested == asked


# -- a prefix on every line of the text (issue 23's dialects; bench/corpus_dialects.py measures them) -------------

WRAPPINGS = {
    "torchrun": lambda n: "[rank0]: ",  # torch >= 2.2 (pytorch/pytorch#117383)
    "srun --label": lambda n: "0: ",
    "logging": lambda n: f"2024-06-01 12:00:{n:02d},123 - INFO - ",
    "loguru": lambda n: f"2024-06-01 12:00:{n:02d}.123 | ERROR    | __main__:main:42 - ",
    "kubectl --timestamps": lambda n: f"2024-06-01T12:00:{n:02d}.123456789Z ",
    "docker compose": lambda n: "trainer-1  | ",
    "pdsh": lambda n: "worker-1: ",
    "mpirun --tag-output": lambda n: "[1,0]<stderr>:",
    "line numbers": lambda n: f"[{1800 + n}] ",
    "quote reply": lambda n: "> ",
}


def wrapped(text: str, prefix) -> str:
    return "\n".join(prefix(n) + line for n, line in enumerate(text.split("\n")))


STEP_LOSS_NAN = "\n".join(["...", "76930 2.6496577", "76940 2.59109", "76950 2.596339", "76960 2.735384",
                           "76970 2.6265104", "76980 nan", "76990 nan", "Saving the model", "77000 nan", "..."])
"""A bare `step loss` column that turns NaN (the pattern of yanmtt's fp16 pretraining log, a dev record)."""
CHECKPOINT_OOM = "\n".join([
    "Epoch 1: 100%|█| 163/163 [18:20<00:00,  6.75s/it, loss=0.98, v_num=0]",
    "Traceback (most recent call last):",
    '  File "/app/train.py", line 91, in <module>',
    "    trainer.save_model(output_dir)",
    '  File "/usr/lib/python3.10/site-packages/transformers/trainer.py", line 2890, in save_model',
    "    self._save(output_dir)",
    NEW_OOM])
"""A save that runs out of memory after the last epoch's bar."""
STARVED_WORDS = ("Training runs, but nvidia-smi shows GPU-Util at 30%-40% the whole time.\nI use 8 dataloader workers "
                 "and the\nepoch takes 6 hours. Is the data loading the bottleneck?")
"""A person's words on an idle GPU (the pattern of ESPnet's 8-GPU LibriSpeech thread, a dev record)."""
EVAL_OOM_WORDS = ("The model trains for one epoch, and at the end of the first epoch, when validation starts, it fails:\n"
                  "RuntimeError: CUDA out of memory. Tried to allocate 1.50 GiB (GPU 0; 11.17 GiB total capacity; "
                  "9.80 GiB already allocated; 800.00 MiB free; 10.10 GiB reserved in total by PyTorch)")
"""The phase in the words before an OOM (the pattern of OpenNMT-py's end-of-epoch validation OOM, a dev record)."""
@pytest.mark.parametrize("dialect", list(WRAPPINGS))
@pytest.mark.parametrize("text", [STEP_LOSS_NAN, STARVED_WORDS, EVAL_OOM_WORDS, CHECKPOINT_OOM, "\n".join(PLAIN)],
                         ids=["step_loss_nan", "starved_words", "eval_oom_words", "checkpoint_oom", "eval_traceback"])
def test_a_prefix_on_every_line_changes_no_answer(dialect: str, text: str) -> None:
    """A launcher's, logger's, runtime's or forum's prefix on every line is not part of the text: the first item
    is the one of the text as printed (before, a rank or task tag hid a `step loss` column's NaN, and a logger's or
    kubectl's time a person's words on an idle GPU and on the validation an OOM stopped)."""
    assert first_id(wrapped(text, WRAPPINGS[dialect])) == first_id(text) != ""


def test_interleaved_ranks_keep_their_tags() -> None:
    """Ranks printing at once: the tag says whose line it is (the rank whose OOM is read, which traceback a frame
    belongs to), so no one rank's tag is a wrapping of the text and every line keeps its own."""
    lines = [f"[rank{n % 2}]: {line}" for n, line in enumerate(PLAIN)]
    prefix = dialect.LinePrefix()
    prefix.lookahead(lines)
    assert [prefix.strip(line) for line in lines] == lines
    prefix = dialect.LinePrefix()
    prefix.lookahead(["[rank1]: " + line for line in PLAIN])
    assert prefix.strip("[rank1]: " + PLAIN[0]) == PLAIN[0] and prefix.strip("[rank0]: x") == "[rank0]: x"


@pytest.mark.parametrize("text", [
    "ERROR: Could not find a version that satisfies the requirement flash-attn",  # pip's own words
    "\n".join(f"{step}: {loss}" for step, loss in [(10, 2.31), (20, 2.11), (30, 1.98), (40, 1.87)]),  # step: loss
    "\n".join(f"{{'loss': {loss}, 'epoch': {epoch}}}" for loss, epoch in [(2.3, 0.1), (2.1, 0.2), (1.9, 0.3)]),
    "\n".join(["Epoch: 10%|█ | 1/10", "Epoch: 20%|██ | 2/10", "Epoch: 30%|███ | 3/10"]),
])
def test_text_that_only_looks_prefixed_is_left_alone(text: str) -> None:
    """What a line starts with is a prefix only where it is a wrapping's shape: pip's `ERROR: `, a `step: loss`
    column, printed dicts and a bar's description are the text."""
    prefix = dialect.LinePrefix()
    lines = text.split("\n")
    prefix.lookahead(lines)
    assert [prefix.strip(line) for line in lines] == lines


def test_a_prefix_on_a_few_lines_only_is_the_text() -> None:
    """A logger's lines among a raw traceback's: its time tells a logging record from the exception's message, so
    it stays (a prefix is learned only where most of the first lines carry it)."""
    lines = ["2024-06-01 12:00:00,123 - INFO - ***** Running training *****"] + PLAIN
    prefix = dialect.LinePrefix()
    prefix.lookahead(lines)
    assert prefix.shape is None and prefix.strip(lines[0]) == lines[0]


def logged(lines: list[str]) -> list[tuple[int, float]]:
    """The (step, loss) of every training record a reader fed these lines one by one reads."""
    reader = TextReader()
    found = [event for line in lines for event in reader.feed(line)] + reader.close()
    return [(e.step, e.values["loss"]) for e in found if type(e).__name__ == "Log"]


def test_a_live_reader_learns_the_prefix_as_lines_come() -> None:
    """A watched `srun --label` command: no look-ahead, the reader learns the prefix from the first lines and
    reads the `step loss` column under it as it reads it bare."""
    plain = logged(STEP_LOSS_NAN.split("\n"))
    assert len(plain) >= 5
    assert logged(wrapped(STEP_LOSS_NAN, WRAPPINGS["srun --label"]).split("\n")) == plain


def test_live_lines_come_back_in_order_each_once() -> None:
    """Held lines are released in the order they came, stripped once the prefix is learned, as printed where the
    run of one shape breaks first; a blank line waits with them."""
    prefix = dialect.LinePrefix()
    lines = ["Launching 1 process", "[rank0]: a", "", "[rank0]: b", "[rank0]: c", "[rank0]: d", "plain"]
    ready = [text for line in lines for text, _ in prefix.live(line)] + [text for text, _ in prefix.flush()]
    assert ready == ["Launching 1 process", "a", "", "b", "c", "d", "plain"]
    prefix = dialect.LinePrefix()
    lines = ["0: a", "1: b", "0: c", "1: d"]  # tasks interleaved: no one tag is most lines'
    ready = [text for line in lines for text, _ in prefix.live(line)] + [text for text, _ in prefix.flush()]
    assert ready == lines


# -- the exception line right after the frames, whatever its class is called ----------------------------------------

_FRAMES = ('Traceback (most recent call last):\n  File "prep.py", line 9, in <module>\n'
           '    ds = load_dataset("json", data_files="d.json")\n')


@pytest.mark.parametrize(("line", "kind"), [
    ("pyarrow.lib.ArrowInvalid: JSON parse error: Missing a name for object member. in row 0", "ArrowInvalid"),
    ("concurrent.futures.process.BrokenProcessPool: A process in the process pool was terminated abruptly",
     "BrokenProcessPool"),
    ("triton.runtime.autotuner.OutOfResources: out of resource: shared memory, Required: 663808, Hardware limit: "
     "101376.", "OutOfResources"),
    ("StopIteration: no batch left", "StopIteration"),
])
@pytest.mark.parametrize("carets", ["", "         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"])
def test_the_line_after_the_frames_is_the_exception_whatever_its_class(line: str, kind: str, carets: str) -> None:
    scanner = tracebacks.TraceScanner()
    for text in (_FRAMES + carets + line).splitlines():
        scanner.line(text)
    assert scanner.first is not None and scanner.first.short_type == kind and not scanner.cut


@pytest.mark.parametrize("after", [
    "UserWarning: the loader is slow",  # a warning printed after a traceback is no exception
    "Killed",
    "Saving checkpoint\nTrainingArguments: output_dir=out",  # not the line right after the frames
])
def test_other_lines_after_the_frames_are_no_exception(after: str) -> None:
    scanner = tracebacks.TraceScanner()
    for text in (_FRAMES + after).splitlines():
        scanner.line(text)
    assert scanner.first is None and scanner.cut


# -- a notebook's traceback cut before its last line ----------------------------------------------------

# segmentation_models with Keras in Jupyter (wave 69 dev): IPython prints the exception's type first, in its header;
# the paste ends inside the frames.
CUT_NOTEBOOK = (
    "{kind}                    Traceback (most recent call last)\n"
    "<ipython-input-24-859d1e145522> in <module>\n"
    "      6     callbacks=callbacks,\n"
    "----> 8     validation_steps=len(valid_dataloader),\n"
    "      9 )\n\n"
    "~\\Anaconda3\\lib\\site-packages\\keras\\engine\\training.py in fit_generator(self, generator)\n"
    "-> 1732             initial_epoch=initial_epoch)\n")


def test_a_cut_notebook_traceback_is_the_exception_its_header_names() -> None:
    items, _ = diagnose_stream(io.BytesIO(CUT_NOTEBOOK.format(kind="KeyError").encode()), "pasted")
    assert items[0].title.startswith("The run failed on KeyError"), items[0].title
    assert "the paste ends before its last line" in items[0].evidence[0]


def test_tensorflows_resource_exhausted_header_is_an_oom_even_cut() -> None:
    assert first_id(CUT_NOTEBOOK.format(kind="ResourceExhaustedError")) == "oom_full"


def test_a_plain_traceback_cut_before_its_line_still_says_so() -> None:
    text = 'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n    main()\n'
    items, _ = diagnose_stream(io.BytesIO(text.encode()), "pasted")
    assert items[0].title.startswith("A traceback ends before its exception line"), items[0].title
