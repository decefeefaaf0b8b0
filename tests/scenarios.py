"""Scripted event sequences of whole runs (deterministic: fixed clock, seeded noise) for app tests."""

from __future__ import annotations

import math
import random

from loratui import events

GIB = 1 << 30
T0 = 1_800_000_000.0


def _begin(max_steps: int) -> list[events.AnyEvent]:
    return [
        events.Header(t=T0, schema=1, run_id="20270115-093000-qwen7b", recipe_hash="abc123", name="qwen7b"),
        events.State(t=T0, state=events.STARTING),
        events.GpuInfo(t=T0 + 0.1, available=True, names=["NVIDIA H200"], totals=[int(139.8 * GIB)], indices=[0]),
        events.State(t=T0 + 1, state=events.LOADING),
        events.TrainBegin(t=T0 + 20, max_steps=max_steps, num_epochs=3.0, device="NVIDIA H200",
                          params_total=7_615_616_512, params_trainable=161_480_704, batch_size=4, grad_accum=4,
                          max_length=1024),
        events.State(t=T0 + 20, state=events.TRAINING),
        events.Estimate(t=T0 + 20, peak_device_gib=22.0, peak_reserved_gib=20.4),
    ]


def run(steps: int = 60, max_steps: int = 200, peak_gib: float = 21.0, seed: int = 0,
        step_s: float = 2.7) -> list[events.AnyEvent]:
    """A QLoRA 7B run in progress: memory rises to `peak_gib` in step 2, loss falls with noise."""
    rng = random.Random(seed)
    out = _begin(max_steps)
    t = T0 + 20
    for step in range(1, steps + 1):
        level = 8.0 if step == 1 else peak_gib
        for window in range(int(step_s * 10)):
            t += 0.1
            used = int((level - 2.0 + 2.0 * math.sin(window / 4) ** 2) * GIB)
            out.append(events.Sample(t=t, gpu=0, used_max=used + int(0.3 * GIB), used_last=used, used_min=used,
                                     total=int(139.8 * GIB), util=92 + rng.randint(0, 6), n=10,
                                     procs={"4242": used}, run_pids=[4242]))
        loss = 2.2 * math.exp(-step / 40) + 0.9 + rng.gauss(0, 0.04)
        out.append(events.Step(t=t, step=step, epoch=step / 66, step_time=step_s, tokens=16384,
                               tokens_seen=16384 * step, torch_allocated=int((level - 4) * GIB),
                               torch_reserved=int((level - 2.5) * GIB), peak_allocated=int((level - 1.8) * GIB),
                               peak_reserved=int((level - 1.4) * GIB)))
        out.append(events.Log(t=t, step=step, values={"loss": loss, "grad_norm": 0.4 + rng.random() * 0.2,
                                                       "learning_rate": 2e-4 * min(1, step / 6)}))
    return out


def paused(steps: int = 40) -> list[events.AnyEvent]:
    """A run the user paused."""
    found = run(steps)
    t = found[-1].t + 0.5
    return found + [events.Control(t=t, command="pause", source="tui"),
                    events.State(t=t + 0.1, state=events.PAUSED, step=steps)]


def paused_by_signal(steps: int = 40) -> list[events.AnyEvent]:
    """A watched command with no Trainer (a plain loop) paused by SIGSTOP, as the supervisor records it."""
    from loratui.supervisor.command import PAUSE_NOTE, PAUSE_REASON
    from loratui.supervisor.watch_output import SIGNAL_CONTROLS

    found = run(steps)
    found[0] = events.Header(t=T0, schema=1, run_id="20270115-093000-train", recipe_hash="abc123", name="train",
                             command=["python", "train.py"], controls=["stop"])
    begin = next(i for i, e in enumerate(found) if isinstance(e, events.TrainBegin))
    found[begin] = events.TrainBegin(t=T0 + 20, max_steps=200, num_epochs=0.0, device="NVIDIA H200",
                                     controls=SIGNAL_CONTROLS, pause_mode="signal")
    t = found[-1].t + 0.5
    return found + [events.Control(t=t, command="pause", source="tui"),
                    events.State(t=t + 0.1, state=events.PAUSED, reason=PAUSE_REASON),
                    events.Notice(t=t + 0.1, level="warning", key="sigstop", message=PAUSE_NOTE),
                    events.Output(t=t + 0.1, stream="loratui", lines=[f"loratui: {PAUSE_NOTE}"])]


OOM_TRACE = [
    "Traceback (most recent call last):",
    '  File "/opt/train.py", line 88, in <module>',
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.32 GiB. GPU 0 has a total capacity of "
    "31.36 GiB of which 1.18 GiB is free. Including non-PyTorch memory, this process has 30.16 GiB memory in use. "
    "Of the allocated memory 24.12 GiB is allocated by PyTorch, and 5.48 GiB is reserved by PyTorch but "
    "unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
]


def failed_oom(steps: int = 30) -> list[events.AnyEvent]:
    """A run above the warning line that died of a fragmented OOM."""
    found = run(steps, peak_gib=31.0)
    t = found[-1].t + 1
    return found + [
        events.Output(t=t, stream="stderr", lines=OOM_TRACE),
        events.End(t=t + 0.5, state=events.FAILED, exit_code=1, error="\n".join(OOM_TRACE)),
    ]


def nan_run(steps: int = 50, bad_from: int = 35) -> list[events.AnyEvent]:
    """The loss turns NaN at `bad_from`."""
    found = []
    for event in run(steps):
        if isinstance(event, events.Log) and event.step >= bad_from:
            event = events.Log(t=event.t, step=event.step, values={"loss": "NaN", "grad_norm": "NaN",
                                                                   "learning_rate": 2e-4})
        found.append(event)
    return found


def with_save(steps: int = 50, save_at: int = 30) -> list[events.AnyEvent]:
    """A run that saves a checkpoint at `save_at`: a 3-second save phase with a memory step up."""
    out: list[events.AnyEvent] = []
    for event in run(steps):
        out.append(event)
        if isinstance(event, events.Log) and event.step == save_at:
            t = event.t
            out.append(events.Phase(t=t, name="save", edge="begin", step=save_at))
            for i in range(30):
                used = int(26.5 * GIB)
                out.append(events.Sample(t=t + 0.1 * (i + 1), gpu=0, used_max=used, used_last=used,
                                         used_min=used, total=int(139.8 * GIB), util=20, n=10))
            out.append(events.Phase(t=t + 3.0, name="save", edge="end", step=save_at))
            out.append(events.Checkpoint(t=t + 3.0, step=save_at, path=f"checkpoints/checkpoint-{save_at}"))
    return out


STARTUP_TRACE = [
    "/opt/venv/lib/python3.11/site-packages/transformers/utils/generic.py:441: FutureWarning: "
    "`torch.utils._pytree._register_pytree_node` is deprecated. Please use `torch.utils._pytree.register_pytree_node` "
    "instead.",
    "  _torch_pytree._register_pytree_node(",
    "Traceback (most recent call last):",
    '  File "/work/loratui/trainer/build.py", line 120, in apply_lora',
    "    model = get_peft_model(model, config)",
    "peft.utils.error.NoMatchingPeftModuleError: Target modules {'nope_proj'} not found in the base model. "
    "Please check the target modules and try again.",
]


def failed_at_start() -> list[events.AnyEvent]:
    """A run whose trainer died while loading (a bad target module): no step, no loss."""
    out = _begin(200)[:4]
    t = T0 + 5
    return out + [events.Output(t=t, stream="stderr", lines=STARTUP_TRACE),
                  events.End(t=t + 0.5, state=events.FAILED, exit_code=1, error="\n".join(STARTUP_TRACE))]
