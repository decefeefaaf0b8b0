"""`loratui apply RUN [ADVICE] [--restart]`: what `A` does in the app, from the shell.

The advice `doctor` and `replay --summary` print for a run (its id, `nan_loss`, names it) is written into a new
copy of the run's recipe (a watched command's YAML/JSON config) beside the original, the same copy `A` and the
MCP tool apply_advice write (`supervisor/restart.py` write_fix); `--restart` then stops the run if it trains and
starts it again with the copy, from its last checkpoint (restart_with), as `y` after `A` does. The advice is
chosen here for all three shells: by id, or the first the run has (what `A` takes with nothing highlighted).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import Any


def register(sub: Any, runs_dir_parent: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the `apply` subparser."""
    cmd = sub.add_parser("apply", parents=[runs_dir_parent],
                         help="write a run's advice into a new copy of its recipe or config (`A` in the app)",
                         description="Write the change a run's advice proposes (`loratui doctor RUN` lists it with "
                         "its id) into a new copy of the run's recipe, or of a watched command's config, beside "
                         "the original; --restart then starts the run again with it.")
    cmd.add_argument("run", help="run id, name or path (`loratui ls` lists them)")
    cmd.add_argument("advice", nargs="?", default=None,
                     help="the advice's id, as doctor prints it (default: the run's first advice)")
    cmd.add_argument("--restart", action="store_true",
                     help="then stop the run if it trains and start it again with the copy (from its last "
                     "checkpoint; from step 0 if it had finished)")
    return cmd


class NoSuchAdvice(ValueError):
    """An advice id the run does not have (bad input: exit 2), where a run with no advice is a no (exit 1)."""


def choose(run: Any, advice_id: str | None) -> Any:
    """The advice to apply: the one named, else the run's first (`A` with nothing highlighted: the first item,
    or the first with a change when the first has none). ValueError says why there is none to apply."""
    from loratui.commands.agent_view import _fold

    _, advisor = _fold(run)
    items = advisor.items()
    if not items:
        raise ValueError(f"{run.run_id} has no advice to apply: nothing in its log calls for a change")
    if advice_id is None:
        first = items[0]
        if first.no_fix:
            raise ValueError(f"{first.id}: cannot be applied ({first.no_fix})")
        chosen = first if first.fix else next((item for item in items if item.fix), first)
    else:
        chosen = next((item for item in items if item.id == advice_id), None)
        if chosen is None:
            raise NoSuchAdvice(f"{run.run_id} has no advice {advice_id!r} now; it has "
                               f"{', '.join(item.id for item in items)}")
    if not chosen.fix:
        raise ValueError(f"{chosen.id}: cannot be applied ({chosen.no_fix or 'it proposes no change'})")
    return chosen


def write(run: Any, item: Any) -> tuple[Path, dict[str, str]]:
    """Write the fixed copy (`A`'s write_fix); its path and the environment a restart gives the trainer."""
    from loratui.supervisor.restart import write_fix

    return write_fix(run, item.id, item.fix)


def restart(run: Any, item: Any, path: Path, env: dict[str, str], source: str, who: str) -> Any:
    """Restart `run` with the written copy (`y` after `A`), the log saying who applied what; the new run."""
    from loratui import events
    from loratui.eventlog import EventWriter
    from loratui.supervisor import control
    from loratui.supervisor.restart import restart_with

    new_run = restart_with(run, path, env, lambda command: control.send(run.control, command, source))
    EventWriter(run.events).write(events.Notice(
        t=time.time(), level="info", key=source,
        message=f"{who}: applied {item.id} ({path.name}); the run goes on as {new_run.run_id}"))
    return new_run


def start_hint(run: Any, path: Path) -> str:
    """How to start the copy by hand: `loratui run COPY`, or a watched command's line with the copy's path."""
    from loratui.logic import command_keys
    from loratui.supervisor.restart import restart_command_line

    command = restart_command_line(run, path)
    watched = list(run.read_settings().command)
    if command or watched:
        return f"loratui run -- {shlex.join(command or command_keys.with_config(watched, str(path)))}"
    return f"loratui run {shlex.quote(str(path))}"


def main(args: argparse.Namespace) -> int:
    """Write the copy (and with --restart, restart); exit 1 when the run has no advice to apply."""
    from loratui import rundir
    from loratui.errors import EXIT_NO, EXIT_OK, ApplyError, UsageError
    from loratui.logic.advisor.render import change_line
    from loratui.text import inert

    run = rundir.resolve(args.run, args.runs_dir, args.everywhere)
    try:
        item = choose(run, args.advice)
        path, env = write(run, item)
    except NoSuchAdvice as exc:
        raise UsageError(str(exc)) from None
    except (ValueError, ApplyError) as exc:
        print(f"loratui: {inert(str(exc), newlines=False)}", file=sys.stderr)
        return EXIT_NO
    change = change_line(item.fix)  # as doctor and the alerts write it
    print(f"wrote {inert(str(path), newlines=False)} ({item.id}: {inert(change, newlines=False)})")
    if not args.restart:
        print(f"start it with `{inert(start_hint(run, path), newlines=False)}`, or `loratui apply {run.run_id} "
              f"{item.id} --restart` to restart the run with it")
        return EXIT_OK
    try:
        new_run = restart(run, item, path, env, "cli", "loratui apply")
    except (ValueError, ApplyError, OSError) as exc:
        print(f"loratui: restart failed: {inert(str(exc), newlines=False)}", file=sys.stderr)
        return EXIT_NO
    print(f"restarted as {new_run.run_id}: `loratui attach {new_run.run_id}` watches it")
    return EXIT_OK
