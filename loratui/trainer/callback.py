"""The Trainer callback: writes step, log and phase events, and obeys control commands at step ends.

Cost matters here (it runs inside the training loop): per optimiser step it reads host-side allocator
counters (no device sync), one small device scalar of tokens seen, and writes one line to the log.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from transformers import TrainerCallback

from loratui import events


class ControlState:
    """Commands relayed by the supervisor on stdin, applied at the next step boundary."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.paused = False
        self.pending: set[str] = set()

    def apply(self, command: str) -> None:
        """Record a command (called from the stdin reader thread or a signal handler)."""
        with self._cond:
            if command == "pause":
                self.paused = True
            elif command == "resume":
                self.paused = False
            else:
                self.pending.add(command)
                self.paused = False if command in ("stop", "suspend") else self.paused
            self._cond.notify_all()

    def take(self, command: str) -> bool:
        """Whether `command` is pending (and consume it)."""
        with self._cond:
            if command in self.pending:
                self.pending.discard(command)
                return True
            return False

    def wait_while_paused(self) -> None:
        """Block until resumed (or stopped/suspended)."""
        with self._cond:
            while self.paused:
                self._cond.wait(0.5)

    def read_commands(self, stream: Any = None) -> None:
        """Follow command lines on `stream` (stdin) until it closes; a closed stdin changes nothing."""
        stream = stream or sys.stdin
        for line in stream:
            command = line.strip()
            if command:
                self.apply(command)


class TokenCounter:
    """Counts non-padding training tokens on the device, read once per optimiser step."""

    def __init__(self) -> None:
        self._total: Any = 0
        self._read = 0

    def hook(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Forward pre-hook: add this micro-batch's attention-mask sum (asynchronously)."""
        if not module.training:
            return
        mask = kwargs.get("attention_mask")
        ids = kwargs.get("input_ids")
        if mask is not None:
            self._total = self._total + mask.sum()
        elif ids is not None:
            self._total = self._total + ids.numel()

    def read(self) -> tuple[int, int]:
        """(tokens since the last read, total tokens)."""
        total = int(self._total)
        delta, self._read = total - self._read, total
        return delta, total


class EventCallback(TrainerCallback):  # type: ignore[misc]
    """Emits the run's training events and applies control commands."""

    def __init__(self, emit: Callable[[events.AnyEvent], None], control: ControlState,
                 tokens: TokenCounter, begin_info: dict[str, Any], cuda: Any = None) -> None:
        self.emit = emit
        self.control = control
        self.tokens = tokens
        self.begin_info = begin_info
        self.cuda = cuda  # torch.cuda when training on a GPU
        self.suspended = False
        self.stopped = False
        self._step_start = time.perf_counter()
        self._in_eval = False

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.emit(events.TrainBegin(t=time.time(), max_steps=state.max_steps,
                                    num_epochs=float(args.num_train_epochs), start_step=state.global_step,
                                    **self.begin_info))
        self.emit(events.Phase(t=time.time(), name="train", edge="begin", step=state.global_step))
        self.emit(events.State(t=time.time(), state=events.TRAINING, step=state.global_step))
        self._step_start = time.perf_counter()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._step_start = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        step_time = time.perf_counter() - self._step_start
        delta, total = self.tokens.read()
        self.emit(events.Step(t=time.time(), step=state.global_step, epoch=float(state.epoch or 0.0),
                              step_time=step_time, tokens=delta, tokens_seen=total, **self._memory()))
        self._obey(state, control)
        if control.should_save:
            self.emit(events.Phase(t=time.time(), name="save", edge="begin", step=state.global_step))

    def _memory(self) -> dict[str, int]:
        if self.cuda is None:
            return {}
        figures = {
            "torch_allocated": self.cuda.memory_allocated(), "torch_reserved": self.cuda.memory_reserved(),
            "peak_allocated": self.cuda.max_memory_allocated(), "peak_reserved": self.cuda.max_memory_reserved(),
        }
        self.cuda.reset_peak_memory_stats()
        return figures

    def _obey(self, state: Any, control: Any) -> None:
        if self.control.paused:
            self.emit(events.State(t=time.time(), state=events.PAUSED, step=state.global_step))
            self.control.wait_while_paused()
            if not (self.control.pending & {"stop", "suspend"}):
                self.emit(events.State(t=time.time(), state=events.TRAINING, step=state.global_step))
        if self.control.take("save"):
            control.should_save = True
        if self.control.take("suspend"):
            self.suspended = True
            control.should_save = True
            control.should_training_stop = True
        if self.control.take("stop"):
            self.stopped = True
            control.should_training_stop = True
        self._step_start = time.perf_counter()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> None:
        values = {k: events.num_out(v) for k, v in (logs or {}).items() if isinstance(v, (int, float))}
        if values:
            self.emit(events.Log(t=time.time(), step=state.global_step, values=values))

    def on_prediction_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not self._in_eval:
            self._in_eval = True
            self.emit(events.Phase(t=time.time(), name="eval", edge="begin", step=state.global_step))

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._in_eval = False
        self.emit(events.Phase(t=time.time(), name="eval", edge="end", step=state.global_step))

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        path = f"{args.output_dir}/checkpoint-{state.global_step}"
        self.emit(events.Phase(t=time.time(), name="save", edge="end", step=state.global_step))
        self.emit(events.Checkpoint(t=time.time(), step=state.global_step, path=path))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.emit(events.Phase(t=time.time(), name="train", edge="end", step=state.global_step))
