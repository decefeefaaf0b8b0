"""The headless view: follow a run's log and print progress (a bar on a TTY, lines otherwise)."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from loratui import events, units
from loratui.logic import fmt
from loratui.logic.advisor import Advisor
from loratui.logic.advisor.render import change_line, headline
from loratui.logic.runstate import RunState
from loratui.rundir import RunDir
from loratui.sources.runlog import LiveSource
from loratui.text import inert
from loratui.tui import failure


def progress_line(s: RunState, width: int = 24, columns: int = 0) -> str:
    """One line: state, bar (none where `width` is 0), step, loss, tokens/s, VRAM, ETA. On a terminal `columns`
    wide, figures that do not fit fold (each whole, "ETA 57s" never split): at 80 columns the terminal broke
    "VRAM 19.1/21.3" in two. Piped (`columns` 0) it stays one line, to grep."""
    state, figures = f"{s.state:<9} ", _figures(s)
    if width <= 0:
        return _fold([state.rstrip(), *figures], columns - 1) if columns else state + "  ".join(figures)
    total = s.total_steps
    filled = int((min(1.0, s.step / total) if total else 0.0) * width)
    return f"{state}[{'#' * filled}{'-' * (width - filled)}] {'  '.join(figures)}"


def bar_width(states: Sequence[RunState], columns: int, most: int = 24) -> int:
    """One bar width for every line of a printout on a terminal `columns` wide (0 when piped: the full bar):
    the widest that lets each line fit, or 0 (no bar) where it would be under 8."""
    if not columns:
        return most
    width = min([most] + [columns - 1 - len(f"{s.state:<9} ") - len("  ".join(_figures(s))) - 3 for s in states])
    return width if width >= 8 else 0


def _figures(s: RunState) -> list[str]:
    vram = "N/A"
    if s.gpus:
        vram = f"{units.gib(s.device_used_now)}/{units.gib(s.device_used_peak)} GiB peak"
    elif s.gpu_available is False:
        vram = "no GPU"
    return [f"step {s.step}/{s.total_steps or '?'}", f"loss {fmt.number(s.last_loss)}",
            s.rate_figure, f"VRAM {vram}", f"ETA {fmt.duration(s.eta_s)}"]


def _fold(fields: list[str], columns: int) -> str:
    """`fields` two spaces apart, on as few lines of `columns` as they fit; continuation lines indented."""
    lines = [fields[0]]
    for field in fields[1:]:
        if len(lines[-1]) + 2 + len(field) > columns:
            lines.append("  " + field)
        else:
            lines[-1] += "  " + field
    return "\n".join(lines)


def follow(run: RunDir, out: TextIO | None = None, poll_s: float = 0.2, since: float | None = None) -> RunState:
    """Print progress until the run ends (or its writers are gone); returns the final state.

    On a terminal: a `rich` progress bar redrawn in place; otherwise a plain line every few seconds. `since`
    (a requeued job's restart, wall time): notices older are the history, folded but not printed again. `out`:
    sys.stdout as it is when called (a default bound at import kept whatever stream was there then: under a test
    runner a captured one, so the progress went nowhere while `started`'s lines, printed to the current one, showed).
    """
    out = out if out is not None else sys.stdout
    source = LiveSource(run)  # the same reader as the app's: one notion of "the run is over"
    state = RunState()
    advisor = Advisor(run.load_recipe()[0])  # as the app's panel: the run's one advice, said at the end
    bar = _RichBar(out) if out.isatty() else None
    last_print, last_step, seen_notices, note = 0.0, -1, 0, ""
    told_output = False
    try:
        while True:
            batch = source.poll()
            state.feed_all(batch.events)
            advisor.feed_all(batch.events)
            if state.command and not told_output:  # a watched command's own prints are not shown here
                told_output = True
                _say(bar, out, output_note(run))
            for notice in state.notices[seen_notices:]:
                if (since is None or notice.t >= since) and not _repeats(notice, state.notices[:seen_notices]):
                    _say(bar, out, f"notice: {inert(notice.message)}")
                seen_notices += 1
            if batch.note != note:  # e.g. "disk full: ...": said once, when it changes
                note = batch.note
                if note:
                    _say(bar, out, f"note: {inert(note)}")
            now = time.monotonic()
            if bar is not None:
                bar.show(state)
            elif state.step != last_step and now - last_print >= 2.0 or state.state in events.FINAL_STATES:
                print(progress_line(state), file=out, flush=True)
                last_print, last_step = now, state.step
            if batch.ended:
                if state.end is None:
                    _say(bar, out, "the run's writers are gone and the log has no end event (were they killed?)")
                break
            time.sleep(poll_s)
    finally:
        if bar is not None:
            bar.stop()
    print_end(state, out, advisor.items())
    return state


def _repeats(notice: events.Notice, said: list[events.Notice]) -> bool:
    """An alert's record ("title: message") of a notice already said: the supervisor logs both."""
    return notice.key == "alert" and any(earlier.message and notice.message.endswith(earlier.message)
                                         for earlier in said if earlier.key != "alert")


def _say(bar: "_RichBar | None", out: TextIO, line: str) -> None:
    """A line above the bar (or a plain line)."""
    if bar is not None:
        bar.progress.console.print(line, markup=False, highlight=False)
    else:
        print(line, file=out)


class _RichBar:
    """The progress bar on a terminal: rich.progress, with the run's figures as its description."""

    def __init__(self, out: TextIO) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        console = Console(file=out)
        # Three columns short of the terminal: the terminal's echo of Ctrl-C ("^C") then fits on the bar's line.
        # On a full-width bar it wrapped to a new line, and the bar's last redraw left a copy of it above.
        console.width = max(20, console.width - 3)
        self.progress = Progress(TextColumn("{task.fields[state]:<9}"), BarColumn(bar_width=24),
                                 MofNCompleteColumn(), TextColumn("{task.description}", markup=False),
                                 console=console, transient=False, auto_refresh=False)
        self.task = self.progress.add_task("", total=None, state="starting")
        self.progress.start()

    def show(self, s: RunState) -> None:
        vram = "N/A"
        if s.gpus:
            vram = f"{units.gib(s.device_used_now)}/{units.gib(s.device_used_peak)} GiB peak"
        elif s.gpu_available is False:
            vram = "no GPU"
        text = (f"loss {fmt.number(s.last_loss)}  {s.rate_figure}  VRAM {vram}  "
                f"ETA {fmt.duration(s.eta_s)}")
        self.progress.update(self.task, completed=s.step, total=s.total_steps or None, description=text,
                             state=s.state)
        self.progress.refresh()

    def stop(self) -> None:
        self.progress.stop()


def output_note(run: RunDir) -> str:
    """Where a watched command's own output goes while this view prints progress only."""
    return (f"the command's own output goes to {inert(str(run.stdout_log))}\n"
            f"(stderr: {inert(run.stderr_log.name)} beside it); the app (attach, above) shows it live")


def started(run: RunDir) -> str:
    """The progress printer's first lines: the run, and one command a line (in one long line an 80-column
    terminal broke `loratui attach ID` inside the id)."""
    return (f"run {run.run_id} in {inert(str(run.path))}\n"
            f"  loratui attach {run.run_id}   (the app, from any directory)\n  loratui stop {run.run_id}")


def detached(run: RunDir, state: str = "") -> str:
    """What the shell is told when the viewer or the progress printer leaves a run: one command a line (in one long
    line an 80-column terminal broke `loratui attach ID` in two). A run left paused or suspended is said to be (it was
    told "training continues" while it stood paused), with the command that resumes it."""
    where = inert(str(run.path.resolve()))
    if state == events.PAUSED:
        return (f"detached: the run stays paused in {where}\nto resume it, come back to it (from any directory), "
                f"or stop it:\n  loratui resume {run.run_id}\n  loratui attach {run.run_id}\n"
                f"  loratui stop {run.run_id}")
    if state == events.SUSPENDED:
        return (f"detached: the run is suspended (saved, its GPU memory freed) in {where}\nto resume it, or to "
                f"stop it:\n  loratui resume {run.run_id}\n  loratui stop {run.run_id}")
    return (f"detached: training continues in {where}\n"
            "to come back to it (from any directory), or to stop it:\n"
            f"  loratui attach {run.run_id}\n  loratui stop {run.run_id}")


def print_end(state: RunState, out: TextIO, advice: Sequence[Any] = ()) -> None:
    """The run's end, its first advice when it failed or has an error (the panel's, doctor's and the
    alert's first line), and a failure's stderr tail."""
    end = state.end
    if end is None:
        return
    # The exit code only where it explains a failure: a suspended run stopped later said "(exit code 75)",
    # the suspend's own code.
    failed = end.state == events.FAILED and end.exit_code not in (0, None)
    print(f"run {state.run_id}: {state.state} at step {state.step}"
          + (f" (exit code {end.exit_code})" if failed else ""), file=out)
    if advice and (end.state == events.FAILED or advice[0].severity == "error"):
        print(f"advice: {inert(headline(advice))}", file=out)
        if advice[0].change:
            print(f"  change: {inert(change_line(advice[0].change))}", file=out)
        if getattr(advice[0], "fix", None) and state.run_id:  # what writes it, as `A` would
            print(f"  apply: loratui apply {state.run_id} {advice[0].id}", file=out)
    if end.state == events.FAILED and end.error:
        print("last lines of the trainer's stderr:", file=out)
        for line in failure.tail(end, 15):  # inert; the signal first, warnings out
            print(f"  {line}", file=out)


def exit_code(state: RunState) -> int:
    """0 when the run finished (or was stopped on request), 1 when it failed or vanished."""
    if state.end is None:
        return 1
    return 0 if state.end.state in (events.FINISHED, events.STOPPED) else 1
