"""The Trainer callback: writes step, log and phase events, and obeys control commands at step ends.

Cost matters here (it runs inside the training loop): per optimiser step it reads host-side allocator
counters (no device sync), one small device scalar of tokens seen, and writes one line to the log.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from loratui import events
from loratui.rundir import CommandTail, file_size, pin_checkpoint
from loratui.trainer.lives import carried_from_checkpoint, tokens_seen_at

PAUSE, SAVE, SUSPEND, STOP = 1, 2, 4, 8
"""Bits of the per-step control decision, the same on every rank."""
_BITS = {"save": SAVE, "suspend": SUSPEND, "stop": STOP}


class ControlState:
    """Commands the supervisor appends to `control.cmds`, read at step boundaries (rank 0 reads the file).

    An append-only file rather than a pipe: every rank can be told (through rank 0 and a broadcast),
    and nothing is lost when several commands arrive within one step.
    """

    def __init__(self, path: Path | None = None, offset: int | None = None) -> None:
        """`offset`: where this trainer's commands begin (the supervisor says, so a command sent while the
        trainer still imported is obeyed at its first step); None: only commands from now on."""
        self.paused = False
        self.pending = 0
        self.stop_requested = False
        if path is not None and offset is None:
            offset = file_size(path)
        self._commands = CommandTail(path, offset or 0) if path is not None else None

    def apply(self, command: str) -> None:
        """Record one command (from the file, or SIGTERM's stop)."""
        if command == "pause":
            self.paused = True
        elif command == "resume":
            self.paused = False
        elif command in _BITS:
            self.pending |= _BITS[command]
            self.stop_requested |= command == "stop"
            if command in ("stop", "suspend"):
                self.paused = False

    def poll(self) -> None:
        """Apply commands appended since the last poll (a stat when there are none)."""
        for command in self._commands.new() if self._commands is not None else []:
            self.apply(command)

    def decision(self) -> int:
        """This step's bits (PAUSE while paused), consuming the one-shot commands."""
        self.poll()
        bits, self.pending = self.pending | (PAUSE if self.paused else 0), 0
        return bits


class RankSync:
    """Makes every rank act on rank 0's decision at the same step boundary."""

    def __init__(self, world_size: int, rank: int, device: Any = None) -> None:
        self.world_size, self.rank, self.device = world_size, rank, device

    def agree(self, bits: int) -> int:
        """Rank 0's bits, on every rank (a no-op for a single process)."""
        if self.world_size <= 1:
            return bits
        import torch
        import torch.distributed as dist

        tensor = torch.tensor([bits], dtype=torch.int64, device=self.device)
        dist.broadcast(tensor, src=0)
        return int(tensor.item())


class TokenCounter:
    """Counts non-padding training tokens on the device, read once per optimiser step."""

    def __init__(self, on_host: bool = False) -> None:
        """`on_host`: read each micro-batch's count at once (a device sync per forward) so that no tensor of
        loratui's stays allocated on the device: in a watched script, even 512 bytes held through the step
        would show in the script's own `max_memory_allocated()`."""
        self.on_host = on_host
        self._total: Any = 0
        self._read = 0
        self.step_len = 0
        """Longest sequence seen in this step's forwards (a shape: host-side, no sync)."""
        self.last_len = 0
        """The sequence length of the latest forward: the batch in flight when an OOM strikes."""

    def hook(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Forward pre-hook: add this micro-batch's attention-mask sum (asynchronously) where it is trained on."""
        if not module.training:
            return
        mask = kwargs.get("attention_mask")
        ids = kwargs.get("input_ids")
        shaped = ids if ids is not None else mask
        if shaped is not None:
            self.last_len = int(shaped.shape[-1])
            self.step_len = max(self.step_len, self.last_len)
        import torch

        if not torch.is_grad_enabled():
            # Scored, not trained on: DPO's reference forward (the same LoRA model, adapter off, under no_grad)
            # or any forward that only scores. TRL's num_tokens counts each batch once; so do we.
            return
        if mask is not None:
            count = mask.sum()
            self._total = self._total + (int(count) if self.on_host else count)
        elif ids is not None:
            self._total = self._total + ids.numel()

    def carry(self, seen: int) -> None:
        """Count on from what the run's earlier lives saw: a resumed trainer's total is the run's."""
        self._total = self._total + seen
        self._read += seen

    def read(self) -> tuple[int, int]:
        """(tokens since the last read, total tokens)."""
        total = int(self._total)
        delta, self._read = total - self._read, total
        return delta, total


class EventCallback(TrainerCallback):
    """Emits the run's training events and applies control commands."""

    def __init__(self, emit: Callable[[events.AnyEvent], None], control: ControlState,
                 tokens: TokenCounter, begin_info: dict[str, Any], cuda: Any = None,
                 sync: RankSync | None = None, reset_peaks: bool = True,
                 pin_saves: bool = True, log_path: Path | None = None, resume_from: str | None = None) -> None:
        """`reset_peaks`: reset torch's peak counters after each step, for a per-step peak. Only in loratui's
        own trainer process: in a watched script the counters are the user's (their
        `max_memory_allocated()` must read as it would alone), so the peaks recorded there are running
        maxima since the process began (or since the script's own reset).

        `pin_saves`: keep a checkpoint saved with `s` out of save_total_limit's rotation (a hard-linked
        copy under `saved/`). Only in loratui's own checkpoints directory: a watched script's output_dir
        gets nothing the Trainer would not write, and a notice says when its rotation may delete it.

        `log_path`: the run's log, where a resumed trainer finds the tokens seen by the step it resumes from;
        `resume_from`: the checkpoint it resumes from, whose run (or trainer_state.json) says them when this run's
        log does not (a new run directory resumed from another run's checkpoint)."""
        self.sync = sync or RankSync(1, 0)
        self.rank = self.sync.rank
        self._emit_all = emit
        # Rank 0 speaks for the run; other ranks only report their own steps (memory per rank).
        self.emit = emit if self.rank == 0 else (lambda event: None)
        self.control = control
        self.tokens = tokens
        self.begin_info = begin_info
        self.cuda = cuda  # torch.cuda when training on a GPU
        self.reset_peaks, self.pin_saves, self.log_path = reset_peaks, pin_saves, log_path
        self.resume_from = resume_from
        self.resumed_seen: int | None = None
        """The tokens seen by the step it resumes from, where its caller read them (a later training phase's step in
        the log is not its Trainer's: trainer/watch.py)."""
        self.suspended = False
        self._hold_after_save = False
        self.stopped = False
        self._step_start = time.perf_counter()
        self._in_eval = False
        self._requested_save = False
        self._saved_at = -1  # the step whose checkpoint was written last

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step > 0:  # resumed: the run's count goes on
            seen = self.resumed_seen if self.resumed_seen is not None else \
                tokens_seen_at(self.log_path, state.global_step, self.rank) if self.log_path is not None else 0
            if not seen:  # no earlier life of this run got there: another run's checkpoint
                seen, said = carried_from_checkpoint(
                    self.resume_from, self.log_path, state.global_step, self.rank,
                    int(getattr(state, "num_input_tokens_seen", 0) or 0), self.sync.world_size)
                self.emit(events.Notice(t=time.time(), level="info", key="tokens_seen", message=said))
            self.tokens.carry(seen)
        self.emit(events.TrainBegin(t=time.time(), max_steps=state.max_steps,
                                    num_epochs=float(args.num_train_epochs), start_step=state.global_step,
                                    **self.begin_info))
        self.emit(events.Phase(t=time.time(), name="train", edge="begin", step=state.global_step))
        self.emit(events.State(t=time.time(), state=events.TRAINING, step=state.global_step))
        self._step_start = time.perf_counter()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._hold_after_save:  # a save asked for while paused is written; now hold again
            self._hold_after_save = False
            self._obey_held(state, control, self._hold(state, PAUSE))
        self._step_start = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        step_time = time.perf_counter() - self._step_start
        delta, total = self.tokens.read()
        max_len, self.tokens.step_len = self.tokens.step_len, 0
        self._emit_all(events.Step(t=time.time(), step=state.global_step, epoch=float(state.epoch or 0.0),
                                   step_time=step_time, tokens=delta, tokens_seen=total, rank=self.rank,
                                   max_len=max_len, **self._memory()))
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
        if self.reset_peaks:
            self.cuda.reset_peak_memory_stats()
        return figures

    def _obey(self, state: Any, control: Any) -> None:
        bits = self.sync.agree(self.control.decision() if self.rank == 0 else 0)
        if bits & PAUSE:
            bits = self._hold(state, bits)
        self._obey_held(state, control, bits)

    def _obey_held(self, state: Any, control: Any, bits: int) -> None:
        if bits & SAVE:
            control.should_save = True
            self._requested_save = True
        if bits & SUSPEND:
            self.suspended = True
            control.should_save = True
            control.should_training_stop = True
        if bits & STOP:
            self.stopped = True
            control.should_training_stop = True
        self._step_start = time.perf_counter()

    def _hold(self, state: Any, bits: int) -> int:
        """Hold every rank at this boundary until resume (or stop/suspend); state stays in memory."""
        self.emit(events.State(t=time.time(), state=events.PAUSED, step=state.global_step))
        held = bits & ~PAUSE
        while bits & PAUSE:
            # Re-agreeing every 0.2 s keeps the other ranks inside short collectives, never near a
            # collective timeout however long the pause.
            time.sleep(0.2)
            bits = self.sync.agree(self.control.decision() if self.rank == 0 else 0)
            held |= bits & ~PAUSE
            if held & SAVE and not held & (STOP | SUSPEND) and bits & PAUSE:
                # `s` while paused: save at this very boundary (the Trainer writes it once we return),
                # then hold again before the next step rather than training on.
                self._hold_after_save = True
                return held
        if not held & (STOP | SUSPEND):
            self.emit(events.State(t=time.time(), state=events.TRAINING, step=state.global_step))
        return held

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

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """A suspend (or stop, or the last step) ends the epoch early, and the Trainer then runs the epoch's end: with
        `save_strategy = "epoch"` it saved the checkpoint again, of the step just saved (a suspend wrote
        checkpoint-5 twice, two `checkpoint` events). This step's checkpoint is written once. Nor does a suspend
        evaluate the epoch it cut short (`eval_strategy = "epoch"` ran a whole evaluation before the process could
        leave): the resumed run finishes the epoch and evaluates at its real end."""
        if self._saved_at == state.global_step:
            control.should_save = False
        if self.suspended:
            control.should_evaluate = False

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._saved_at = state.global_step
        # Absolute: a watched script's output_dir is relative to its own working directory.
        path = os.path.abspath(f"{args.output_dir}/checkpoint-{state.global_step}")
        if self._requested_save and args.save_total_limit and args.should_save and not self.pin_saves:
            self.emit(events.Notice(
                t=time.time(), level="warning", key="training.save_total_limit",
                message=f"saved {path}; the script's save_total_limit = {args.save_total_limit} deletes it like "
                        "any other checkpoint once newer ones are written: copy it to keep it"))
        elif self._requested_save and args.save_total_limit and args.should_save:
            # The user asked for this one: save_total_limit's rotation must never take it away.
            try:
                path = str(pin_checkpoint(Path(path)))
            except OSError as exc:  # a full disk must not stop training: say so instead
                self.emit(events.Notice(t=time.time(), level="warning", key="training.save_total_limit",
                                        message=f"could not keep {path} out of the rotation ({exc})"))
        self._requested_save = False
        self.emit(events.Phase(t=time.time(), name="save", edge="end", step=state.global_step))
        self.emit(events.Checkpoint(t=time.time(), step=state.global_step, path=path))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.emit(events.Phase(t=time.time(), name="train", edge="end", step=state.global_step))
