"""loratui inside a watched command (`loratui run -- COMMAND`): each `transformers.Trainer` gets its callback.

The startup hook (trainer/hook/sitecustomize.py, then trainer/autohook.py) imports this module only when
the script itself imports `transformers.trainer`; then `Trainer.__init__` adds a `LoratuiCallback` (so TRL's
SFTTrainer, axolotl and LLaMA-Factory, which subclass it, get it too), and `Trainer.train` takes the
checkpoint the supervisor names on a resume after suspend and exits with SUSPEND_EXIT after a suspend.

The callback is the recipe run's `EventCallback`, built at train begin from the live Trainer, so steps,
logs, phases, memory, tokens, pause, save and stop behave exactly as for a recipe. Outside a loratui run
(no LORATUI_RUN_DIR) it does nothing.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from loratui import events
from loratui.eventlog import EventWriter
from loratui.phases import Phases, shifted
from loratui.rundir import SUSPEND_EXIT, RunDir, replace_file
from loratui.trainer.lives import Resumed

RUN_ENV, PARENT_ENV = "LORATUI_RUN_DIR", "LORATUI_SUPERVISOR_PID"
"""Set by the supervisor for the watched command: the run directory, and the command's parent (its keeper). The
checkpoint a launch resumes from is no variable the script would see: `RunDir.resume`, read at the first train()."""
WATCHED_OPTIONS = {"reset_peaks": False, "pin_saves": False}
"""The callback in a user's process leaves its state alone: torch's peak counters are the script's (the
peaks recorded are running maxima), and its output_dir gets only what its Trainer writes."""


_Phases = Phases()
"""This process's training phases: a later train() counts on after the steps recorded (`loratui.phases`)."""


class _Resuming:
    """A process the supervisor resumes after a suspend (`RunDir.resume`: the checkpoint) runs the script from its start.
    The checkpoint is its phase's: a script that trains twice and was suspended in its second train() resumes that
    one, from the checkpoint, on the run's step axis where it stopped; the train() calls before it run again as the
    script asks, recorded again from their start. (The first train() took the checkpoint: the warm-up resumed the
    main phase's state, and the main phase trained again from its step 1, recorded after the warm-up's.)"""

    def __init__(self) -> None:
        self.calls = 0  # hooked train() calls so far in this process
        self.path = ""  # the checkpoint, until the train() it belongs to takes it
        self.found: Resumed | None = None  # where the log says it was written

    def take(self, run_dir: str) -> tuple[str, Resumed | None]:
        """The checkpoint (and where it was written) when this train() call is the one to resume from it."""
        self.calls += 1
        if self.calls == 1:
            self.path = _resume_from(RunDir(Path(run_dir)))
            if self.path:
                from loratui.trainer.lives import resumed_phase

                self.found = resumed_phase(RunDir(Path(run_dir)).events, self.path)
        if not self.path or self.calls < (self.found.phase if self.found is not None else 1):
            return "", None
        path, self.path = self.path, ""
        return path, self.found

    def ahead(self) -> int:
        """The phase still to be resumed (0: none): the train() running now comes before it and runs again."""
        return self.found.phase if self.path and self.found is not None else 0


_RESUMING = _Resuming()


def _resume_from(run: RunDir) -> str:
    """The checkpoint this launch resumes from, as the supervisor wrote it before the launch ('' for none)."""
    try:
        return run.resume.read_bytes()[:4096].decode("utf-8", "surrogateescape").strip()
    except OSError:
        return ""


class LoratuiCallback(TrainerCallback):
    """`callbacks=[loratui.LoratuiCallback()]`: loratui's events and controls inside a loratui run."""

    def __init__(self) -> None:
        self.run_dir = os.environ.get(RUN_ENV, "")
        self.inner: Any = None  # the EventCallback, from train begin on
        self.via_train = False  # training runs through Trainer.train: suspend/resume can work
        self.log: EventWriter | None = None  # open from train begin to train end
        self.ended = False  # training ended: the log is closed (`write`)
        self.trainer: Any = None  # a weakref to the Trainer it serves (set by the patched __init__)
        self.resume_from: Any = None  # train()'s resume_from_checkpoint (a path, True, or None)
        self._unhook: Any = None
        self.offset = 0  # this phase's shift onto the run's step axis (`_Phases`)
        self.resumed: Resumed | None = None  # where the checkpoint it resumes from after a suspend was written

    @property
    def suspended(self) -> bool:
        return bool(self.inner is not None and self.inner.suspended)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not self.run_dir:
            return
        later = _Phases.count > 0
        resumed = self.resumed if self.resumed is not None and 0 < state.global_step <= self.resumed.step else None
        if resumed is not None:  # where it stopped before the suspend, not after what this process trained again
            _Phases.count += 1
            self.offset = resumed.step - int(state.global_step)
        else:
            self.offset = _Phases.begin(int(state.global_step))
        self.inner = self._start(args, kwargs.get("model"), kwargs.get("train_dataloader"))
        if resumed is not None:
            self.inner.resumed_seen = resumed.tokens_seen
        elif later and state.global_step == 0:
            self.inner.tokens.carry(_Phases.tokens_seen)  # the run's total counts on too
        if int(args.process_index) == 0:
            self._say_phase(state, resumed)
        self.inner.on_train_begin(args, state, control, **kwargs)

    def _say_phase(self, state: Any, resumed: Resumed | None) -> None:
        """A notice where this phase's steps are not recorded as its Trainer counts them, or are recorded again."""
        if resumed is not None and self.offset:
            message = (f"training phase {_Phases.count} resumed at its step {state.global_step} (the checkpoint of "
                       f"the run's step {resumed.step}): its step N is recorded as the run's step {self.offset} + N, "
                       "as before the suspend")
        elif _RESUMING.ahead() > _Phases.count:
            message = (f"training phase {_Phases.count} runs again: this process resumes the script's phase "
                       f"{_RESUMING.ahead()} from its checkpoint and runs the script from its start, so the steps of "
                       f"the train() calls before it are trained and recorded again, from the run's step "
                       f"{self.offset + int(state.global_step)}")
        elif self.offset:
            message = (f"training phase {_Phases.count} began (another train() in the script, from its step "
                       f"{state.global_step}): the run's steps count on after step {_Phases.last_step}, so its "
                       f"step N is recorded as the run's step {self.offset} + N")
        else:
            return
        self.write(events.Notice(t=time.time(), level="info", key="train_phase", message=message))

    def write(self, event: events.AnyEvent) -> None:
        """Write one event on the run's step axis (a later training phase's steps after the earlier ones'). After
        training (the suspend's state, an evaluate() of the script's) the log is opened for the event alone: the
        script's code after train() sees no descriptor of loratui's."""
        assert self.log is not None
        event = shifted(event, self.offset)
        _Phases.saw(event)
        if not self.ended:
            self.log.write(event)
            return
        writer = EventWriter(RunDir(Path(self.run_dir)).events)
        try:
            writer.write(event)
        finally:
            writer.close()

    def _start(self, args: Any, model: Any, loader: Any) -> Any:
        import torch
        import transformers

        from loratui.trainer.build import count_parameters
        from loratui.trainer.callback import ControlState, EventCallback, RankSync, TokenCounter

        run = RunDir(Path(self.run_dir))
        self.log, self.ended = EventWriter(run.events), False
        world, rank = int(args.world_size), int(args.process_index)
        cuda = args.device.type == "cuda"
        control = ControlState(run.commands)
        # Suspend ends the process with SUSPEND_EXIT for the supervisor to see: only where this process is
        # the command itself (not under a launcher, which would report a failure) and trains via train().
        direct = os.environ.get(PARENT_ENV) == str(os.getppid())
        suspend = ["suspend"] if self.via_train and world == 1 and direct else []
        controls = ["pause", "resume", "save", "stop", *suspend]
        seq_len = 0
        if rank == 0:
            with _random_state_kept(args.device):
                seq_len = self._preflight(run, args, model, loader, cuda)
            _write_json(run.hooked, {"pid": os.getpid(), "world_size": world, "controls": controls})
        tokens = TokenCounter(on_host=True)  # nothing of loratui's held on the device through a step
        if model is not None:
            self._unhook = model.register_forward_pre_hook(tokens.hook, with_kwargs=True).remove
        total, trainable = count_parameters(model) if model is not None else (0, 0)
        info = {"device": torch.cuda.get_device_name(args.device) if cuda else "cpu", "params_total": total,
                "params_trainable": trainable, "batch_size": int(args.per_device_train_batch_size),
                "grad_accum": int(args.gradient_accumulation_steps), "max_length": seq_len,
                "world_size": world,
                "pid": os.getpid(), "controls": controls,
                "versions": {"torch": str(torch.__version__), "transformers": str(transformers.__version__)}}
        sync = RankSync(world, rank, args.device if cuda else None)
        # No signal handler and no reset of torch's peak counters: both are the script's own (`loratui
        # stop` reaches a hooked Trainer through control.cmds, read at the next step boundary).
        return EventCallback(self.write, control, tokens, info, torch.cuda if cuda else None, sync,
                             log_path=run.events, resume_from=self.resume_from, **WATCHED_OPTIONS)

    def _preflight(self, run: RunDir, args: Any, model: Any, loader: Any, cuda: bool) -> int:
        """The estimate a recipe gets, from the live settings; the live recipe beside it for the advice."""
        from loratui.recipe import RecipeError, load_recipe
        from loratui.trainer.preflight import (
            config_lengths,
            live_recipe,
            longest_example,
            padded_length,
            recipe_text,
            record_estimate,
        )
        from loratui.trainer.runtime import read_runtime

        assert self.log is not None
        seq_len, max_length, how = longest_example(args, getattr(loader, "dataset", None))
        seq_len = padded_length(getattr(loader, "collate_fn", None), seq_len, max_length)
        try:
            warn_gb = load_recipe(run.recipe).monitor.warn_gb
        except RecipeError:
            warn_gb = 30.0
        try:
            recipe = live_recipe(args, model, seq_len, max_length, warn_gb)
            text = recipe_text(recipe, " ".join(run.read_settings().command))
        except (RecipeError, AttributeError, TypeError, ValueError) as exc:
            message = f"no VRAM estimate for these live settings ({exc}); the run is watched as usual"
            self.log.write(events.Notice(t=time.time(), level="info", message=message))
            return seq_len
        replace_file(run.recipe, text.encode("utf-8"))
        # every fold advises from it
        self.log.write(events.Settings(t=time.time(), recipe=text, lengths=config_lengths(args)))
        try:
            runtime, unknown = read_runtime(self.trainer() if self.trainer else None, model)
        except Exception as exc:  # noqa: BLE001 - reading a foreign trainer must never stop its training
            runtime, unknown = {}, f"could not read how the trainer computes its loss ({type(exc).__name__})"
        if unknown:  # a number here would be a guess dressed as a measurement
            self.log.write(events.Notice(t=time.time(), level="info", key="estimate",
                                         message=f"no VRAM estimate: {unknown}"))
            return seq_len
        record_estimate(self.log.write, recipe, model, cuda, int(args.local_process_index), seq_len, runtime, how)
        return seq_len

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.inner is None:
            return
        self.inner.on_train_end(args, state, control, **kwargs)
        if self._unhook is not None:
            self._unhook()
        if self.log is not None:  # the script's code after train() sees no descriptor of loratui's
            self.log.close()
            self.ended = True


def _delegate(name: str) -> Any:
    def method(self: LoratuiCallback, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.inner is not None:
            getattr(self.inner, name)(args, state, control, **kwargs)
    method.__name__ = name
    return method


for _name in ("on_step_begin", "on_step_end", "on_log", "on_prediction_step", "on_evaluate", "on_save", "on_epoch_end"):
    setattr(LoratuiCallback, _name, _delegate(_name))

# -- patching transformers.Trainer ------------------------------------------------------------------------


@contextlib.contextmanager
def _random_state_kept(device: Any) -> Iterator[None]:
    """Give back whatever the preflight draws from the script's generators: measuring the dataset runs its
    __getitem__ (or a datasets transform), which may draw random numbers (a random crop), and the sampler's
    shuffle, dropout and those crops must then be the ones the script draws alone."""
    import random

    import torch

    numpy = sys.modules.get("numpy")
    state = random.getstate()
    numpy_state = numpy.random.get_state() if numpy is not None else None
    # This rank's GPU only: reading another's state would open a CUDA context on it.
    devices = [device.index if device.index is not None else torch.cuda.current_device()] \
        if device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        random.setstate(state)
        if numpy_state is not None:
            numpy.random.set_state(numpy_state)


def patch(trainer_class: Any) -> None:
    """Give every Trainer (subclasses too) loratui's callback, and make train() resumable by loratui."""
    if getattr(trainer_class, "_loratui_patched", False):
        return
    original_init, original_train = trainer_class.__init__, trainer_class.train

    @functools.wraps(original_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        if os.environ.get(RUN_ENV) and _callback(self) is None:
            self.add_callback(LoratuiCallback())
        callback = _callback(self)
        if callback is not None:  # the estimate reads how this trainer computes its loss
            callback.trainer = weakref.ref(self)

    @functools.wraps(original_train)
    def train(self: Any, *args: Any, **kwargs: Any) -> Any:
        callback = _callback(self) if os.environ.get(RUN_ENV) else None
        if callback is None:
            return original_train(self, *args, **kwargs)
        resume, callback.resumed = _RESUMING.take(callback.run_dir)
        if resume:
            args, kwargs = args[1:], {**kwargs, "resume_from_checkpoint": resume}
        callback.via_train = True
        callback.resume_from = kwargs.get("resume_from_checkpoint", args[0] if args else None)
        result = original_train(self, *args, **kwargs)
        if callback.suspended:
            # Checkpoint written: leave now, before the script's after-training code (saving the final
            # model, evaluating) runs on a half-trained model. The supervisor resumes it later.
            step = self.state.global_step
            if callback.log is not None:
                callback.write(events.State(t=time.time(), state=events.SUSPENDED, step=step))
                callback.log.close()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(SUSPEND_EXIT)
        return result

    trainer_class.__init__, trainer_class.train = __init__, train
    trainer_class._loratui_patched = True


def _callback(trainer: Any) -> LoratuiCallback | None:
    handler = getattr(trainer, "callback_handler", None)
    for callback in getattr(handler, "callbacks", []):
        if isinstance(callback, LoratuiCallback):
            return callback
    return None


def _write_json(path: Path, value: dict[str, Any]) -> None:
    replace_file(path, json.dumps(value).encode("utf-8"))
