"""Out-of-memory errors of the other PyTorch devices: Apple's MPS and Intel's XPU are OOMs, read with their numbers and
answered with the device's own settings (no PYTORCH_CUDA_ALLOC_CONF, nvidia-smi or CUDA_VISIBLE_DEVICES for them).

The messages are quoted verbatim from public threads (source in a comment above each).
"""

from __future__ import annotations

import io

from loratui.commands.doctor import diagnose_stream
from loratui.logic import oom
from loratui.logic.oom import GIB
from tests.test_oom_reading import new_oom

# pytorch/pytorch#152351 (a transformers Trainer on a Mac)
MPS_TRAINER = """\
  File "/opt/anaconda3/envs/huggingface/lib/python3.10/site-packages/transformers/trainer.py", line 3782, in training_step
    self.accelerator.backward(loss, **kwargs)
  File "/opt/anaconda3/envs/huggingface/lib/python3.10/site-packages/torch/autograd/graph.py", line 825, in _engine_run_backward
    return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass
RuntimeError: MPS backend out of memory (MPS allocated: 11.14 GB, other allocations: 6.65 GB, max allowed: 18.13 GB). \
Tried to allocate 375.40 MB on private pool. Use PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 to disable upper limit for memory \
allocations (may cause system failure).
"""

# mattmireles/gemma-tuner-multimodal#18: the message as the console wrapped it
MPS_WRAPPED = """\
RuntimeError: MPS backend out of memory (MPS allocated: 9.48 GiB, other allocations: 480.00 KiB, max allowed: 9.47 GiB).
Tried to allocate 256 bytes on shared pool. Use PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 to disable upper limit for memory 
allocations (may cause system failure).
"""

# PyTorch's MPS allocator with the cap lifted (PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0) prints no "max allowed"
# (aten/src/ATen/mps/MPSAllocator.mm); the numbers are those of pytorch/pytorch#130112
MPS_NO_CAP = ("RuntimeError: MPS backend out of memory (MPS allocated: 5.50 GB, other allocations: 14.76 GB). "
              "Tried to allocate 147.24 MB on private pool.")

# intel/torch-xpu-ops#1773
XPU_NEW = """\
Traceback (most recent call last):
  File "/workspace/peft/examples/sft/./test.py", line 8, in <module>
    ret = x.softmax(-1, dtype=torch.float32)
          ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
torch.OutOfMemoryError: XPU out of memory. Tried to allocate 29.54 GiB. GPU 0 has a total capacity of 63.98 GiB. Of \
the allocated memory 44.30 GiB is allocated by PyTorch, and 1.37 MiB is reserved by PyTorch but unallocated. Please use \
`empty_cache` to release all unoccupied cached memory.
"""

# intel/torch-xpu-ops#3157: 9.01 of 11.59 GiB free, the request alone larger than the card
XPU_TOO_LARGE = ("torch.OutOfMemoryError: XPU out of memory. Tried to allocate 32.00 GiB. GPU 0 has a total capacity "
                 "of 11.59 GiB of which 9.01 GiB is free. Of the allocated memory 0 bytes is allocated by PyTorch, and "
                 "0 bytes is reserved by PyTorch but unallocated. Please use empty_cache to release all unoccupied "
                 "cached memory.")

# Comfy-Org/ComfyUI#8767 (IPEX's older wording, CUDA's old format)
XPU_OLD = ("RuntimeError: XPU out of memory. Tried to allocate 5.12 GiB (GPU 0; 15.11 GiB total capacity; 13.40 GiB "
           "already allocated; 13.90 GiB reserved in total by PyTorch)")

CUDA_WORDS = ("PYTORCH_CUDA_ALLOC_CONF", "nvidia-smi", "CUDA_VISIBLE_DEVICES", "CUDA ", "set_per_process_memory_fraction")


def advice(text: str) -> list:
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return items


def words(item) -> str:
    return " ".join([item.title, *item.evidence])


def test_mps_oom_is_an_oom_with_its_numbers() -> None:
    line = MPS_TRAINER.splitlines()[-1]
    report = oom.parse_oom(line)
    assert report is not None and report.device == "mps"
    assert report.kind == oom.FULL
    assert report.requested == int(375.40 * 10**6)
    assert report.reserved == int(11.14 * 10**9)  # MPS allocated: PyTorch's heaps
    assert report.process_used == int(11.14 * 10**9) + int(6.65 * 10**9)  # with the other Metal allocations
    assert report.allowed == int(18.13 * 10**9)  # the high watermark's cap


def test_mps_oom_advice_fits_the_device() -> None:
    items = advice(MPS_TRAINER)
    assert items[0].id == "oom_full"
    said = words(items[0])
    assert "MPS out of memory" in items[0].title
    assert "16.88 GiB" in said  # the cap (18.13 GB), as read
    assert "6.19 GiB" in said  # other allocations (6.65 GB)
    assert "PYTORCH_MPS_HIGH_WATERMARK_RATIO" in said and "system" in said  # the knob and what it risks
    assert not any(word in said for word in CUDA_WORDS), said
    assert not items[0].change or not any(key.startswith("env.PYTORCH_CUDA") for key in items[0].change)


def test_mps_message_wrapped_by_the_console_is_read_whole() -> None:
    items = advice(MPS_WRAPPED)
    assert items[0].id == "oom_full"
    said = words(items[0])
    assert "MPS out of memory" in items[0].title and "9.47 GiB" in said and "9.48 GiB" in said
    assert "tried to allocate 256 bytes" in said and "other Metal allocations: 480.00 KiB" in said
    assert not any(word in said for word in CUDA_WORDS), said


def test_mps_without_a_cap_says_the_memory_itself_ran_out() -> None:
    report = oom.parse_oom(MPS_NO_CAP)
    assert report is not None and report.device == "mps" and report.allowed is None and report.kind == oom.FULL
    items = advice(MPS_NO_CAP)
    said = words(items[0])
    assert items[0].id == "oom_full" and "no cap" in said
    assert not any(word in said for word in CUDA_WORDS), said


def test_xpu_oom_is_an_oom_read_like_cudas() -> None:
    report = oom.parse_oom(XPU_NEW.splitlines()[-1])
    assert report is not None and report.device == "xpu"
    assert report.requested == int(29.54 * GIB) and report.total == int(63.98 * GIB)
    old = oom.parse_oom(XPU_OLD)
    assert old is not None and old.device == "xpu" and old.total == int(15.11 * GIB)
    assert old.reserved_unallocated is not None and old.reserved_unallocated < GIB
    items = advice(XPU_NEW)
    assert items[0].id.startswith("oom_") and items[0].title.startswith("XPU out of memory")
    said = words(items[0])
    assert not any(word in said for word in CUDA_WORDS), said


def test_xpu_request_beyond_the_card() -> None:
    items = advice(XPU_TOO_LARGE)
    assert items[0].id == "oom_full"
    said = words(items[0])
    assert "32.00 GiB" in said and not any(word in said for word in CUDA_WORDS), said


# intel/torch-xpu-ops#3011: 5.65 GiB free of 5.65 GiB, 4.66 GiB asked: the memory was there, no block of it served
XPU_FREE = ("torch.OutOfMemoryError: XPU out of memory. Tried to allocate 4.66 GiB. GPU 0 has a total capacity of "
            "5.65 GiB of which 5.65 GiB is free. Of the allocated memory 195.50 KiB is allocated by PyTorch, and 1.81 "
            "MiB is reserved by PyTorch but unallocated. Please use `empty_cache` to release all unoccupied cached "
            "memory.")


def test_xpu_fragmentation_gets_no_cuda_allocator_setting() -> None:
    items = advice(XPU_FREE)
    assert items[0].id == "oom_fragmentation" and items[0].title.startswith("XPU OOM from fragmentation")
    said = words(items[0])
    assert "torch.xpu.empty_cache()" in said and not items[0].change
    assert not any(word in said for word in CUDA_WORDS), said
    assert "195.50 KiB" in said


def test_xpu_fragmentation_names_the_allocator_variable_xpu_reads() -> None:
    """Trial 11: the advice named no allocator variable. PyTorch's XPU allocator reads PYTORCH_ALLOC_CONF (the one
    variable of every accelerator; checked in torch 2.13), and there is no PYTORCH_XPU_ALLOC_CONF."""
    said = words(advice(XPU_FREE)[0])
    assert "PYTORCH_ALLOC_CONF=expandable_segments:True" in said, said
    assert "torch 2.13" in said and "there is no PYTORCH_XPU_ALLOC_CONF" in said, said


def test_other_processes_are_named_with_the_devices_tools() -> None:
    told = "Another process is using the GPU memory.\n"
    xpu = advice(told + "torch.OutOfMemoryError: XPU out of memory. Tried to allocate 5.12 GiB.\n")[0]
    assert xpu.id == "oom_other_process" and xpu.title.startswith("XPU OOM")
    assert "xpu-smi ps" in words(xpu) and "ZE_AFFINITY_MASK" in words(xpu)
    assert not any(word in words(xpu) for word in CUDA_WORDS), words(xpu)
    mps = advice(told + "RuntimeError: MPS backend out of memory\n")[0]
    assert mps.id == "oom_other_process" and "the Mac's memory" in mps.title and "Activity Monitor" in words(mps)
    assert not any(word in words(mps) for word in CUDA_WORDS), words(mps)


def test_cuda_oom_still_says_cuda() -> None:
    line = new_oom("2.00 GiB", "79.15 GiB", "1.05 GiB", "70.21 GiB", "6.95 GiB")
    report = oom.parse_oom(line)
    assert report is not None and report.device == "cuda"
    items = advice(line)
    assert items[0].id == "oom_fragmentation" and "PYTORCH_CUDA_ALLOC_CONF" in items[0].title


def test_cpu_allocator_is_still_no_gpu_oom() -> None:
    line = ("RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 123 bytes. Error code 12 "
            "(Cannot allocate memory)")
    assert oom.parse_oom(line) is None


def test_the_supervisors_oom_alert_names_the_device() -> None:
    """`loratui run`'s OOM alert (a notice in the log, a push to the endpoint) says MPS, not CUDA, on a Mac."""
    from loratui import events
    from loratui.recipe import Recipe
    from loratui.supervisor.watch import RunWatch

    written: list = []
    watch = RunWatch("r1", Recipe(), written.append)
    watch.feed([events.State(t=1.0, state="training"),
                events.Output(t=2.0, stream="stderr", lines=MPS_TRAINER.splitlines())])
    (alert,) = [e.message for e in written if isinstance(e, events.Notice) and e.key == "alert"]
    assert alert.startswith("MPS out of memory (the 16.88 GiB cap was reached)"), alert
    assert "CUDA" not in alert, alert


def test_the_guards_oom_action_names_the_device(tmp_path) -> None:
    """The opt-in guard's reason for a restart says which device ran out."""
    from loratui import events
    from loratui.logic.advisor import Advisor
    from loratui.recipe import GuardSection, Recipe
    from loratui.rundir import RunDir
    from loratui.supervisor.guard import Guard

    advisor = Advisor(Recipe()).feed_all([events.State(t=1.0, state="training"),
                                          events.Output(t=2.0, stream="stderr", lines=MPS_TRAINER.splitlines())])
    action = Guard(RunDir(tmp_path), GuardSection(enabled=True), lambda e: None).after_failure(advisor)
    assert action is not None and action.why.startswith("MPS out of memory after step"), action
