"""The headless view: follow a run's log and print progress (a bar on a TTY, lines otherwise)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from loratui import events
from loratui import units
from loratui.logic import fmt
from loratui.logic.runstate import RunState
from loratui.rundir import RunDir
from loratui.sources.runlog import LiveSource


def progress_line(s: RunState, width: int = 24) -> str:
    """One line: state, bar, step, loss, tokens/s, VRAM, ETA."""
    done = (s.step / s.max_steps) if s.max_steps else 0.0
    filled = int(done * width)
    bar = "#" * filled + "-" * (width - filled)
    vram = "N/A"
    if s.gpus:
        vram = f"{units.gib(s.device_used_now)}/{units.gib(s.device_used_peak)} GiB peak"
    elif s.gpu_available is False:
        vram = "no GPU"
    return (f"{s.state:<9} [{bar}] step {s.step}/{s.max_steps or '?'}  loss {fmt.number(s.last_loss)}  "
            f"tok/s {fmt.rate(s.tokens_per_s)}  VRAM {vram}  ETA {fmt.duration(s.eta_s)}")


def follow(run: RunDir, out: TextIO = sys.stdout, poll_s: float = 0.2) -> RunState:
    """Print progress until the run ends (or its supervisor disappears); returns the final state."""
    source = LiveSource(run)  # the same reader as the app's: one notion of "the run is over"
    state = RunState()
    tty = out.isatty()
    last_print, last_step = 0.0, -1
    seen_notices = 0
    while True:
        batch = source.poll()
        state.feed_all(batch.events)
        for notice in state.notices[seen_notices:]:
            print(("\r\n" if tty else "") + f"notice: {notice.key}: {notice.message}", file=out)
        seen_notices = len(state.notices)
        now = time.monotonic()
        if tty:
            out.write("\r" + progress_line(state)[:200] + "\x1b[K")
            out.flush()
        elif state.step != last_step and now - last_print >= 2.0 or state.state in events.FINAL_STATES:
            print(progress_line(state), file=out, flush=True)
            last_print, last_step = now, state.step
        if batch.ended:
            if state.end is None:
                print("\nthe supervisor is gone and the log has no end event (was it killed?)", file=out)
            break
        time.sleep(poll_s)
    if tty:
        out.write("\n")
    _print_end(state, out)
    return state


def _print_end(state: RunState, out: TextIO) -> None:
    end = state.end
    if end is None:
        return
    print(f"run {state.run_id}: {end.state} at step {state.step}"
          + (f" (exit code {end.exit_code})" if end.exit_code not in (0, None) else ""), file=out)
    if end.state == events.FAILED and end.error:
        print("last lines of the trainer's stderr:", file=out)
        for line in end.error.splitlines()[-15:]:
            print(f"  {line}", file=out)


def exit_code(state: RunState) -> int:
    """0 when the run finished (or was stopped on request), 1 when it failed or vanished."""
    if state.end is None:
        return 1
    return 0 if state.end.state in (events.FINISHED, events.STOPPED) else 1
