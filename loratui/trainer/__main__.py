"""The trainer process: `python -m loratui.trainer RUN_DIR [--resume-from CHECKPOINT]`.

Spawned by the supervisor. Builds model, data and Trainer from the run's recipe, appends its events to
the run's log, obeys the commands appended to `control.cmds` at step boundaries, and exits 0 when done or
stopped, 75 when suspended, 1 on an error (whose traceback goes to stderr, where the supervisor and the
advisor read it). If the supervisor dies, rank 0 carries on for it (trainer/orphan.py).
"""

from __future__ import annotations

import argparse
import atexit
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, NoReturn

from loratui import events
from loratui.eventlog import EventWriter
from loratui.recipe import RecipeError
from loratui.rundir import SUSPEND_EXIT, RunDir, write_pidfile
from loratui.trainer import streams
from loratui.trainer.orphan import OwnerWatch, outcome
from loratui.trainer.preflight import record_estimate
from loratui.trainer.stackdump import arm as arm_stack_dumps


def main(argv: list[str] | None = None) -> int:
    """Train; see the module docstring for the exit codes."""
    parser = argparse.ArgumentParser(prog="python -m loratui.trainer")
    parser.add_argument("run_dir")
    parser.add_argument("--resume-from", default=None)
    args = parser.parse_args(argv)
    streams.install()  # a full disk must not end training through a failed print
    run = RunDir(Path(args.run_dir))
    arm_stack_dumps(run.path)  # `loratui stacks RUN`: every thread's stack on SIGUSR1, even while loading
    log = EventWriter(run.events)
    rank0 = int(os.environ.get("RANK", "0")) == 0
    watch = OwnerWatch(run, log)
    if rank0:
        write_pidfile(run.trainer_pidfile)
        log.write(events.State(t=time.time(), state=events.LOADING, reason="loading model and data"))
        watch.start()
    from loratui.trainer.callback import ControlState  # imports transformers: after "loading" is on record

    offset = os.environ.get("LORATUI_CMDS_OFFSET")
    control = ControlState(run.commands, offset=int(offset) if offset else None)
    signal.signal(signal.SIGTERM, lambda *_: _on_sigterm(control))
    from loratui.trainer.data import DataError

    code, error, progress = 1, None, {"step": 0}
    try:
        code = train(run, log, control, args.resume_from, progress)
        return code
    except DataError as exc:
        print(f"loratui: {run.recipe}: {exc}", file=sys.stderr)
        code = 2
        return code
    except RecipeError as exc:
        print(f"loratui: {exc}", file=sys.stderr)
        code = 2
        return code
    except BaseException as exc:
        error = exc if not isinstance(exc, SystemExit) else None
        code = exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else 1
        raise
    finally:
        if rank0:
            state = events.SUSPENDED if code == SUSPEND_EXIT else outcome(code, control.stop_requested, error)
            if int(os.environ.get("WORLD_SIZE", "1")) == 1:  # under torchrun, rank 0's exit is not the run's
                # On record before the supervisor's End: a supervisor killed in between leaves the outcome known.
                log.write(events.Exit(t=time.time(), state=state, exit_code=code, step=progress["step"]))
            watch.finish(state, code, progress["step"], error)
            run.trainer_pidfile.unlink(missing_ok=True)
        log.close()


_TRAINING = False
"""Set once the Trainer's loop runs: before it, a stop has nothing to save and ends the process at once."""


def _on_sigterm(control: Any) -> None:
    """SIGTERM: stop at the next step boundary, or right away while the model is still loading."""
    control.apply("stop")
    if not _TRAINING:
        raise SystemExit(0)


def train(run: RunDir, log: EventWriter, control: object, resume_from: str | None,
          progress: dict[str, int]) -> int:
    """Build everything and run `Trainer.train`."""
    import torch
    import transformers
    from transformers import Trainer

    from loratui.trainer import build, data
    from loratui.trainer.callback import EventCallback, RankSync, TokenCounter
    from loratui.trainer.resume_hooks import extra_callbacks

    settings = run.read_settings()
    recipe, why = run.load_recipe()
    if recipe is None:
        raise RecipeError(why)
    base_dir = Path(settings.recipe_dir)
    cuda = torch.cuda.is_available()
    resolved = build.resolve_for_machine(recipe, cuda)
    for key, message in resolved.notices if int(os.environ.get("RANK", "0")) == 0 else []:
        log.write(events.Notice(t=time.time(), level="warning", message=message, key=key))
        print(f"loratui: {key}: {message}", file=sys.stderr)
    recipe = resolved.recipe
    model_path = build.resolve_model_path(settings.model_path or recipe.model.path, base_dir)
    tokenizer = build.load_tokenizer(model_path, recipe)
    rows = data.load_rows(recipe.data, base_dir)
    dataset = data.tokenise(rows, recipe.data, tokenizer)
    train_set, eval_set = dataset, None
    if recipe.data.eval_fraction > 0:
        train_set, eval_set = data.split(dataset, recipe.data.eval_fraction, recipe.training.seed)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    transformers.set_seed(recipe.training.seed)
    model = build.load_model(recipe, model_path, cuda, local_rank)
    if int(os.environ.get("RANK", "0")) == 0:
        record_estimate(log.write, recipe, model, cuda, local_rank, longest_batch(recipe, train_set))
    tokens = TokenCounter()
    model.register_forward_pre_hook(tokens.hook, with_kwargs=True)
    total, trainable = build.count_parameters(model)
    begin_info = {
        "device": torch.cuda.get_device_name(local_rank) if cuda else "cpu", "params_total": total,
        "params_trainable": trainable, "batch_size": recipe.training.per_device_train_batch_size,
        "grad_accum": recipe.training.gradient_accumulation_steps, "max_length": recipe.data.max_length,
        "world_size": int(os.environ.get("WORLD_SIZE", "1")), "pid": os.getpid(),
        "versions": {"torch": str(torch.__version__), "transformers": str(transformers.__version__)},
    }
    world_size, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    sync = RankSync(world_size, rank, torch.device("cuda", local_rank) if cuda else None)
    callback = EventCallback(log.write, control, tokens, begin_info, torch.cuda if cuda else None, sync,  # type: ignore[arg-type]
                             log_path=run.events, resume_from=resume_from)
    trainer = Trainer(
        model=model, args=build.training_arguments(recipe, str(run.checkpoints), settings.max_steps),
        train_dataset=train_set, eval_dataset=eval_set,
        data_collator=data.PadCollator(tokenizer.pad_token_id), callbacks=[callback, *extra_callbacks(run.recipe)],
    )
    global _TRAINING
    _TRAINING = True
    try:
        trainer.train(resume_from_checkpoint=resume_from)
    except Exception as exc:
        progress["step"] = trainer.state.global_step
        if "OutOfMemoryError" in type(exc).__name__ or "out of memory" in str(exc):
            # Which batch died: the advisor tells one long sample from a card that is simply full.
            log.write(events.Notice(t=time.time(), level="error", key="oom_batch",
                                    message=f"out of memory on a batch of sequence length {tokens.last_len}"))
        raise
    progress["step"] = trainer.state.global_step
    if callback.suspended:
        callback.emit(events.State(t=time.time(), state=events.SUSPENDED, step=trainer.state.global_step))
        return SUSPEND_EXIT
    return 0


def longest_batch(recipe: Any, examples: list[dict[str, list[int]]]) -> int:
    """The longest sequence a batch can have: the collator pads to the longest example (multiple of 8)."""
    if recipe.data.packing or not examples:
        return int(recipe.data.max_length)
    longest = max(len(example["input_ids"]) for example in examples)
    return min(int(recipe.data.max_length), -(-longest // 8) * 8)


def leave(code: int) -> NoReturn:
    """Exit without the interpreter's teardown of torch and transformers: 1.3-2.8 s measured on a loaded 2-core
    box after the last event, which the supervisor's End, a guard's restart and a stop all waited on (and a
    supervisor killed in that window left the run without its End). What a normal exit does that matters still
    happens: other threads are joined, atexit handlers run (logging, multiprocessing's workers), the streams
    are flushed."""
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    leave(main())  # an exception still leaves the usual way, its traceback printed
