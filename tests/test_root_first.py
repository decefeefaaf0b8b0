"""Issue 23: when several findings fire, the first item is the root cause a maintainer would name.

One rank fails (a KeyError in its collate, a shape error, a device-side assert, a library that cannot load); the
others wait in their next collective until NCCL's watchdog times out, or learn that their peer is gone, and the
launcher ends the rest. The earliest root-cause error on any rank leads; the timeouts and peer failures after
it are its consequences. A timeout with nothing before it stays the timeout.
"""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream


def ids(text: str) -> list[str]:
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return [item.id for item in items]


WATCHDOG = ("[rank0]:[E ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=1021, OpType=ALLREDUCE, NumelIn=8192, NumelOut=8192, Timeout(ms)=1800000) ran for "
            "1800123 milliseconds before timing out.")
TEARDOWN = [
    "terminate called after throwing an instance of 'c10::DistBackendError'",
    "  what():  [PG 0 Rank 0] Process group watchdog thread terminated with exception: [Rank 0] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=1021, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800123 "
    "milliseconds before timing out.",
    "E0515 10:22:31.000000 140 torch/distributed/elastic/multiprocessing/api.py:833] failed (exitcode: -6) "
    "local_rank: 0 (pid: 141) of binary: /usr/bin/python",
    "Traceback (most recent call last):",
    '  File "/usr/local/bin/torchrun", line 8, in <module>',
    "    sys.exit(main())",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
]


def rank_traceback(rank: int, frames: list[tuple[str, str, str]], error: str) -> list[str]:
    lines = [f"[rank{rank}]: Traceback (most recent call last):"]
    for path, func, code in frames:
        lines += [f'[rank{rank}]:   File "{path}", line 10, in {func}', f"[rank{rank}]:     {code}"]
    return lines + [f"[rank{rank}]: {error}"]


KEYERROR = rank_traceback(1, [("/home/u/train.py", "main", "batch = collate(samples)"),
                              ("/home/u/data.py", "collate", "ids = [s['input_ids'] for s in samples]")],
                          "KeyError: 'input_ids'")
SHAPE = rank_traceback(3, [("/work/proj/model.py", "forward", "x = self.proj(x).view(b, t, h, -1)")],
                       "RuntimeError: shape '[4, 512, 32, -1]' is invalid for input of size 1000")


@pytest.mark.parametrize("before", [KEYERROR, SHAPE])
def test_an_exception_on_one_rank_leads_the_timeout_it_caused(before: list[str]) -> None:
    found = ids("\n".join(before + [WATCHDOG] + TEARDOWN))
    assert found[:2] == ["exception", "nccl_timeout"]
    items, _ = diagnose_stream(io.BytesIO("\n".join(before + [WATCHDOG]).encode()), "pasted")
    assert "the distributed timeout printed after it is its consequence" in items[0].evidence[-1]
    assert not any("consequence" in line for line in items[1].evidence)


def test_an_exception_leads_a_peer_that_saw_the_rank_go() -> None:
    peer = rank_traceback(0, [("/home/u/train.py", "main", "loss.backward()")],
                          "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
                          "NCCLUtils.hpp:275, remote process exited or there was a network error, NCCL version 2.20.5")
    assert ids("\n".join(SHAPE + peer))[0] == "exception"


@pytest.mark.parametrize("before", [
    ["[rank3]: RuntimeError: CUDA error: device-side assert triggered"],
    ["[rank1]: RuntimeError: CUDA Setup failed despite GPU being available. Please run the following command to get "
     "more information: python -m bitsandbytes"],
    ["[rank1]: ImportError: /opt/conda/lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: "
     "undefined symbol: _ZN3c104cuda9SetDeviceEi"],
])
def test_a_setup_or_cuda_error_leads_the_timeout_after_it(before: list[str]) -> None:
    found = ids("\n".join(before + [WATCHDOG]))
    assert found[0] != "nccl_timeout" and "nccl_timeout" in found


def test_a_later_consequence_does_not_overtake_the_first() -> None:
    # torch 1.x: the watchdog's line, then the communicator aborted without its reason
    assert ids("\n".join([WATCHDOG, "RuntimeError: NCCL communicator was aborted on rank 0."]))[0] == "nccl_timeout"


def test_a_communicator_aborted_by_the_watchdog_is_the_timeout() -> None:
    aborted = ("RuntimeError: NCCL communicator was aborted on rank 1.  Original reason for failure was: [Rank 1] "
               "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2874, OpType=ALLREDUCE, NumelIn=1, "
               "NumelOut=1, Timeout(ms)=1800000) ran for 1800617 milliseconds before timing out.")
    assert ids(aborted) == ["nccl_timeout"]
    assert ids("\n".join([WATCHDOG, "Traceback (most recent call last):", '  File "/home/u/train.py", line 180, '
                          "in main", "    dist.all_reduce(loss)", aborted]))[0] == "nccl_timeout"


@pytest.mark.parametrize("before", [
    [],
    # the launcher ending a rank, a wrapper, a peer's failure: consequences, never the cause of a timeout
    ["torch.distributed.elastic.multiprocessing.api.SignalException: Process 141 got signal: 15"],
    ["subprocess.CalledProcessError: Command '['/usr/bin/python', 'train.py']' returned non-zero exit status 1."],
    ["[rank1]: torch.distributed.DistNetworkError: Connection reset by peer"],
])
def test_a_timeout_with_no_root_before_it_stays_the_timeout(before: list[str]) -> None:
    assert ids("\n".join(before + [WATCHDOG] + TEARDOWN))[0] == "nccl_timeout"


CHATGLM_STORE = [
    # dev record, https://github.com/hiyouga/ChatGLM-Efficient-Tuning/issues/137 (cut before the store's reason)
    "Running tokenizer on dataset: 47%|███████████████▊ | 3169000/6811963 [30:11<38:27, 1578.58 examples/s]"
    "Traceback (most recent call last):",
    'File "/mnt/data/ChatMedNorm/src/utils/common.py", line 506, in preprocess_data',
    'with training_args.main_process_first(desc="dataset map pre-processing"):',
    'File "/mnt/data/envs/lib/python3.9/site-packages/torch/distributed/distributed_c10d.py", line 3328, in barrier',
    "work = default_pg.barrier(opts=opts)",
    "RuntimeError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value "
    "store by key '0', but store->get('0') got error",
]


def test_a_store_error_at_the_rendezvous_is_a_distributed_timeout() -> None:
    assert ids("\n".join(CHATGLM_STORE))[0] == "nccl_timeout"
    items, _ = diagnose_stream(io.BytesIO("\n".join(CHATGLM_STORE).encode()), "pasted")
    assert "preprocessing" in items[0].title  # rank 0 was still tokenising when rank 1's wait ran out
    # the same failure on a newer torch, another rank and key, no bar: still the rendezvous, not an exception
    newer = ("[rank2]: torch.distributed.DistBackendError: [2] is setting up NCCL communicator and retrieving "
             "ncclUniqueId from [0] via c10d key-value store by key '1:0', but store->get('1:0') got error: "
             "Connection reset by peer")
    assert ids(newer)[0] == "nccl_timeout"
    assert ids("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError")[0] == "nccl_timeout"


@pytest.mark.parametrize("text", [
    "INFO store->get('0') succeeded, NCCL communicator ready",
    "RuntimeError: Default process group has not been initialized, please make sure to call init_process_group.",
])
def test_no_store_failure_without_one(text: str) -> None:
    assert "nccl_timeout" not in ids(text)


PHI3_WARNINGS = [
    # transformers' remote code for Phi-3 prints these at every load and goes on with eager attention
    "`flash-attention` package not found, consider installing for better performance: No module named 'flash_attn'.",
    "Current `flash-attention` does not support `window_size`. Either upgrade or use `attn_implementation='eager'`.",
]
BNB_WARNING = ("/opt/conda/lib/python3.10/site-packages/bitsandbytes/cextension.py:34: UserWarning: The installed "
               "version of bitsandbytes was compiled without GPU support. 8-bit optimizers, 8-bit multiplication, and "
               "GPU quantization are unavailable.")
DATA_KEYERROR = [
    "Traceback (most recent call last):",
    '  File "/home/u/train.py", line 99, in <module>',
    "    trainer.train()",
    '  File "/home/u/.venv/lib/python3.10/site-packages/datasets/arrow_dataset.py", line 2200, in __getitem__',
    "    return self._getitem(key)",
    "KeyError: 'text'",
]


BNB_CPU_LOADED = r"CUDA SETUP: Loading binary C:\env\lib\site-packages\bitsandbytes\libbitsandbytes_cpu.dll..."
"""bitsandbytes loading its CPU build (wave 22's dev half, bitsandbytes#298): it goes on with it, as its warning says."""


@pytest.mark.parametrize("warning", [PHI3_WARNINGS, [BNB_WARNING], [BNB_CPU_LOADED, BNB_WARNING]])
def test_an_exception_after_a_setup_warning_it_does_not_touch_leads(warning: list[str]) -> None:
    found = ids("\n".join(warning + ["{'loss': 1.9, 'learning_rate': 0.0002, 'epoch': 0.1}"] + DATA_KEYERROR))
    assert found[0] == "exception" and len(found) == 2


@pytest.mark.parametrize("error", [
    "AttributeError: 'NoneType' object has no attribute 'cadam32bit_grad_fp32'",
    "ImportError: cannot import name 'BitsAndBytesConfig' from 'transformers'",
])
def test_an_exception_of_the_warned_library_is_its_setup(error: str) -> None:
    assert ids("\n".join([BNB_WARNING, error]))[0] == "bnb_setup"
    assert ids("\n".join([BNB_CPU_LOADED, BNB_WARNING, error]))[0] == "bnb_setup"


def test_windows_pause_after_the_exception_is_not_its_message() -> None:
    """A .bat launcher's `pause` prints `Press any key to continue . . .` under the traceback: not the message."""
    text = "\n".join(DATA_KEYERROR[:-1] + ["ModuleNotFoundError: No module named 'llama_inference_offload'",
                                           "Press any key to continue . . ."]) + "\n"
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    assert items[0].id == "exception" and "Press any key" not in items[0].title


def test_a_setup_error_raised_before_an_exception_stays_first() -> None:
    raised = "ImportError: /opt/venv/lib/python3.11/site-packages/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so: " \
             "undefined symbol: _ZN3c104cuda9SetDeviceEi"
    assert ids("\n".join([raised] + DATA_KEYERROR))[0] == "flash_attn_unavailable"


def test_a_setup_warning_is_no_root_of_a_timeout() -> None:
    assert ids("\n".join(PHI3_WARNINGS + [WATCHDOG]))[0] == "nccl_timeout"


LOGS = ["{'loss': 1.9, 'learning_rate': 0.0002, 'epoch': 0.1}", "{'loss': 1.6, 'learning_rate': 0.0002, 'epoch': 0.2}",
        "{'loss': 1.4, 'learning_rate': 0.0002, 'epoch': 0.3}"]


@pytest.mark.parametrize("warning", [PHI3_WARNINGS, [BNB_WARNING],
                                     ["[WARNING|patcher.py:92] FlashAttention2 is not installed."],
                                     ["/opt/venv/lib/python3.10/site-packages/xformers/__init__.py:51: UserWarning: "
                                      "Flash Attention is not available in this build"]])
def test_a_setup_warning_the_run_trained_past_is_a_note(warning: list[str]) -> None:
    items, _ = diagnose_stream(io.BytesIO("\n".join(warning + LOGS).encode()), "pasted")
    assert [(a.severity, "trained on without it" in a.title) for a in items] == [("info", True)]


@pytest.mark.parametrize("lines", [
    PHI3_WARNINGS,  # nothing after it: the warning is all the text shows
    PHI3_WARNINGS + LOGS[:1],  # one log is no run going on
    # an error raised, not a warning: logs printed around it do not make it one
    ["ImportError: FlashAttention2 has been toggled on, but it cannot be used due to the following error: the "
     "package flash_attn seems to be not installed."] + LOGS,
])
def test_a_setup_finding_without_training_after_it_stays_an_error(lines: list[str]) -> None:
    items, _ = diagnose_stream(io.BytesIO("\n".join(lines).encode()), "pasted")
    assert items[0].severity == "error" and items[0].id == "flash_attn_unavailable"


def test_a_cuda_fault_wrapped_by_the_watchdog_is_a_cause_of_the_timeout_after_it() -> None:
    wrapped = ("[rank1]:[E1204 10:00:00 ProcessGroupNCCL.cpp:1515] [PG 0 Rank 1] Process group watchdog thread "
               "terminated with exception: CUDA error: device-side assert triggered")
    assert ids("\n".join([wrapped, WATCHDOG]))[:2] == ["cuda_error", "nccl_timeout"]
    # a KeyError on another rank before it still leads: the first root cause wins
    assert ids("\n".join(KEYERROR + [WATCHDOG, wrapped]))[0] == "exception"


SDPA_NOTE = ("C:\\Users\\me\\venv\\lib\\site-packages\\transformers\\models\\llama\\modeling_llama.py:602: UserWarning: "
             "1Torch was not compiled with flash attention. (Triggered internally at ..\\aten\\src\\ATen\\native\\"
             "transformers\\cuda\\sdp_utils.cpp:455.)")


@pytest.mark.parametrize("after", [[], LOGS, DATA_KEYERROR])
def test_torchs_own_sdpa_note_is_never_a_failure(after: list[str]) -> None:
    items, _ = diagnose_stream(io.BytesIO("\n".join([SDPA_NOTE] + after).encode()), "pasted")
    note = next(a for a in items if a.id == "flash_attn_unavailable")
    assert note.severity == "info" and "nothing failed" in note.title and note.change == {}
    assert items[0].id == ("exception" if after is DATA_KEYERROR else "flash_attn_unavailable")


@pytest.mark.parametrize(("line", "seconds"), [
    # gloo's monitored barrier (TORCH_DISTRIBUTED_DEBUG=DETAIL) and its transport
    ("RuntimeError: Rank 1 failed to pass monitoredBarrier in 1800000 ms", "1800 s"),
    ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:84] Timed out waiting 1800000ms for "
     "recv operation to complete", ""),
    # torch 2.2+'s heartbeat monitor over a stuck watchdog
    ("[rank0]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 0] Heartbeat monitor timed out! Process will be terminated "
     "after dumping debug info. workMetaList_.size()=1", ""),
    # Horovod's stall inspector
    ("[2024-01-01 10:00:00.000000: W /tmp/pip-install/horovod/common/stall_inspector.cc:107] One or more tensors "
     "were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of "
     "ranks for more than 60 seconds.", "60 s"),
])
def test_a_collective_some_rank_never_reached_in_other_layers(line: str, seconds: str) -> None:
    items, _ = diagnose_stream(io.BytesIO(line.encode()), "pasted")
    assert items[0].id == "nccl_timeout" and seconds in items[0].title


@pytest.mark.parametrize("line", [
    "[I ProcessGroupGloo.cpp] Rank 0 passed monitoredBarrier in 12 ms",
    "Horovod stall check disabled: HOROVOD_STALL_CHECK_DISABLE=1",
])
def test_a_collective_all_ranks_reached_is_no_timeout(line: str) -> None:
    assert "nccl_timeout" not in ids(line)


def test_the_first_of_two_setup_errors_leads() -> None:
    bnb_failed = "RuntimeError: CUDA Setup failed despite GPU being available. Please run the following command to " \
                 "get more information: python -m bitsandbytes"
    cuda_fault = "RuntimeError: CUDA error: no kernel image is available for execution on the device"
    # bitsandbytes could not set up, then its kernels failed: bitsandbytes is the cause
    assert ids("\n".join([bnb_failed, cuda_fault]))[0] == "bnb_setup"
    # CUDA itself could not start, and bitsandbytes' setup failed on it: CUDA is the cause
    no_driver = "UserWarning: CUDA initialization: Found no NVIDIA driver on your system."
    assert ids("\n".join([no_driver, bnb_failed]))[0] == "cuda_error"


def test_an_oom_only_named_in_words_does_not_hide_the_root_exception() -> None:
    text = ["I sometimes get OOM on this cluster, but now it fails like this:"] + KEYERROR + [WATCHDOG]
    assert ids("\n".join(text))[:2] == ["exception", "nccl_timeout"]


BARRIER = ("I0510 07:28:04.417845 139863945226048 distributed_c10d.py:337] Waiting in store based barrier to initialize "
           "process group for rank: 2, key: store_based_barrier_key:2 (world_size=8, worker_count=7, timeout=0:30:00)")
"""torch's own line (the format of torch/distributed/distributed_c10d.py's _store_based_barrier), written for this
test with made-up numbers."""


def test_a_rank_missing_at_the_store_based_barrier_is_a_start_that_waits() -> None:
    """Wave 20's dev half: ranks waiting at the process group's start for one that never came (a wandb login held it)
    were read as nothing, or as the host's RAM from `看显存和内存，不像是不够` (it does NOT look short)."""
    text = "训练刚开始就卡住，看显存和内存，不像是不够的样子。\n" + BARRIER + "\n"
    items, _ = diagnose_stream(io.BytesIO(text.encode()), "paste")
    assert [item.id for item in items][:1] == ["nccl_timeout"]
    assert "7 of 8 ranks arrived" in items[0].title and "is waiting" in items[0].title
    final = BARRIER.replace("Waiting in store based barrier to initialize process group for",
                            "Timed out initializing process group in store based barrier on")
    items, _ = diagnose_stream(io.BytesIO((final + "\n").encode()), "paste")
    assert items[0].id == "nccl_timeout" and "timed out" in items[0].title  # text.py's timeout, as before
