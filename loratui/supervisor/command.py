"""The owner side of a watched command (`loratui run -- COMMAND`): its environment, and control by signal.

The command runs in its own process group with loratui's startup hook on its PYTHONPATH. Whether the
hook found a Trainer is known from `trainer.hook.json` (written by the hook at train begin); until then,
and for a process with no Trainer, control is by signal: SIGSTOP/SIGCONT of the whole group (and of the groups its
processes lead: a launcher's ranks) for pause and resume (no step boundary: its memory, GPU memory too, stays
held), SIGTERM of the group for stop.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import psutil

import loratui
from loratui import bounds, events
from loratui.eventlog import read_log
from loratui.rundir import RunDir, replace_file

HOOK_DIR = Path(loratui.__file__).resolve().parent / "trainer" / "hook"
"""Holds the hook's sitecustomize.py; found by path: the owner side never imports the trainer side."""
RUN_ENV, ROOT_ENV = "LORATUI_RUN_DIR", "LORATUI_HOOK_ROOT"
STALE_ENV = ("LORATUI_RESUME_FROM", "LORATUI_CMDS_OFFSET")
"""Variables of loratui's that a watched command never gets (the checkpoint a launch resumes from is `RunDir.resume`;
the hook reads commands from train begin): where the user's shell has one (a loratui run started from a watched
program), it is taken out."""
PARENT_ENV = "LORATUI_SUPERVISOR_PID"
KEEPER_ENV = "LORATUI_KEEPER"
"""Set for the command's keeper (supervisor/keeper.py) alone: the hook's sitecustomize then hooks nothing
and runs no sitecustomize of the user's in it (that is for the user's own processes)."""
READ_SIGNAL = signal.SIGUSR1
"""The supervisor to the command's keeper, its child: the command has exited and its output is read to its end, the
steps it printed recorded (the keeper's `exit` then says the last one, from the log)."""
STOPPED_SIGNAL = signal.SIGUSR2
"""The supervisor to the command's keeper: its stop's signal reached the running command, so the command's exit code
is the stop's whatever it is (torchrun's 1); the keeper's `exit` then says stopped, as the supervisor's End will."""
PAUSE_NOTE = ("paused by SIGSTOP: the process is frozen mid-step; its GPU memory stays held, and peers of a "
              "multi-process job may time out")
PAUSE_REASON = "paused by SIGSTOP: GPU memory stays held; multi-process peers may time out"
"""The paused state's reason (the status line shows it, so it fits 80 columns); PAUSE_NOTE says it whole."""
CPU_PAUSE_NOTE = ("paused by SIGSTOP: the process is frozen mid-step; its memory stays held, and peers of a "
                  "multi-process job may time out")
CPU_PAUSE_REASON = "paused by SIGSTOP: its memory stays held; multi-process peers may time out"


def pause_words(gpu: bool) -> tuple[str, str]:
    """(reason, note) of a SIGSTOP pause: GPU memory is held only on a machine with a GPU (a CPU box said it)."""
    return (PAUSE_REASON, PAUSE_NOTE) if gpu else (CPU_PAUSE_REASON, CPU_PAUSE_NOTE)


def suspend_reason(gpu: bool) -> str:
    """A suspended run's reason, recorded: replay shows it too, where `r` does nothing; `loratui resume` works
    wherever it is read (the live app's `r` does too, and its footer says so)."""
    return f"checkpoint written, {'GPU' if gpu else 'memory'} freed; `loratui resume` continues"


def header_has_gpu(run: RunDir) -> bool:
    """Whether the run's header found GPUs (its `gpu_totals`), for the keeper: the supervisor that probed is gone."""
    try:
        with open(run.events, "rb") as handle:
            header = events.decode_line(handle.readline(1 << 20))
    except OSError:
        return False
    return isinstance(header, events.Header) and bool(header.gpu_totals)


def command_env(run: RunDir, base: dict[str, str]) -> dict[str, str]:
    """The command's environment: the user's, plus the hook on PYTHONPATH and the run it reports to (README: the
    `LORATUI_*` variables that let the processes it starts be watched: the run, loratui's install, its parent)."""
    env = {k: v for k, v in base.items() if k not in STALE_ENV}
    path = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HOOK_DIR), path) if p)
    env[RUN_ENV] = str(run.path.resolve())
    env[ROOT_ENV] = str(HOOK_DIR.parents[2])
    env[PARENT_ENV] = str(os.getpid())  # suspend needs the Trainer's own exit code: the direct child only
    return env


def say_resume(run: RunDir, resume_from: str | None) -> None:
    """Tell the next launch's hook the checkpoint its Trainer resumes from (`RunDir.resume`), or that there is none."""
    if resume_from:
        replace_file(run.resume, resume_from.encode("utf-8", "surrogateescape"), 0o600)
    else:
        run.resume.unlink(missing_ok=True)


def hook_info(run: RunDir) -> dict[str, Any] | None:
    """What the hook said at train begin (pid, world_size, controls), or None: no Trainer hooked (yet)."""
    try:
        info = json.loads(bounds.read_text(run.hooked))
    except (OSError, ValueError, RecursionError):  # a run dir is data: a FIFO, junk or a deep file here
        return None
    return info if isinstance(info, dict) else None


def last_checkpoint(run: RunDir) -> str | None:
    """The newest checkpoint the watched Trainer recorded (its output_dir is the script's own)."""
    found = [e.path for e in read_log(run.events).events if isinstance(e, events.Checkpoint)]
    return found[-1] if found else None


def signal_group(pid: int, sig: int) -> bool:
    """Send `sig` to the command's process group (it leads its own); False when it is gone."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def signal_tree(pid: int, sig: int) -> bool:
    """`sig` to the command's process group and to every group one of its descendants leads: torchrun's agent starts
    each rank in a session of its own, so the group's SIGSTOP froze the agent alone and its ranks trained on under a
    `paused` run (29 steps in 3 s), and a SIGKILL left them running without it. For SIGSTOP, SIGCONT and SIGKILL; a
    stop's SIGTERM goes to the group alone (torchrun terminates its ranks itself, and reports a failure when they die
    under it). False when the command's group is gone."""
    try:  # found before the signal: a killed launcher's ranks are no longer its descendants
        others = [child.pid for child in psutil.Process(pid).children(recursive=True) if _leads_group(child.pid)]
    except psutil.Error:
        others = []
    if not signal_group(pid, sig):
        return False  # not the command's group (a keeper's pid, the command not started or gone): nothing of it
    for group in others:
        signal_group(group, sig)
    return True


def _leads_group(pid: int) -> bool:
    """Only a group a descendant leads is signalled (never a group it joined, such as the supervisor's)."""
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


def refuse_without_hook(command: str) -> str | None:
    """Why a command cannot apply to a process that has no hooked Trainer, or None when it can."""
    if command in ("save", "suspend"):
        return (f"{command} needs a transformers Trainer in the command (none was hooked); "
                "pause (SIGSTOP), resume and stop apply")
    return None


def stop_signals(pid: int, hooked: dict[str, Any] | None) -> bool:
    """Stop's first signal: SIGTERM to the whole group of a process with no hook (woken first, if paused).
    None to a hooked Trainer: the control file speaks (read at the next step boundary), so the hook never
    installs a signal handler in the user's process. True when the SIGTERM was delivered: the command's exit
    code is then the signal's (a launcher's own, such as torchrun's 1 after it terminated its ranks)."""
    if hooked is not None:
        return False
    signal_tree(pid, signal.SIGCONT)  # its ranks too, where a pause froze them
    return signal_group(pid, signal.SIGTERM)
