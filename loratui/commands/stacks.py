"""`loratui stacks [RUN]`: every thread's Python stack of every trainer rank, recorded in the log and shown.

Each rank dumps on SIGUSR1 (faulthandler, set up by the trainer) without stopping, so an NCCL or
DataLoader deadlock can be seen without a debugger.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any, runs_dir_parent: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the `stacks` subparser."""
    cmd = sub.add_parser("stacks", parents=[runs_dir_parent],
                         help="dump every trainer rank's thread stacks into the log and show them")
    cmd.add_argument("run", nargs="?", default=None, help="run id, name or path (default: the running one)")
    return cmd


def main(args: argparse.Namespace) -> int:
    """Collect and print the dump; exit 1 when no trainer of the run is running."""
    from loratui import rundir
    from loratui.errors import EXIT_NO, EXIT_OK
    from loratui.supervisor import stacks

    run = rundir.resolve(args.run, args.runs_dir, args.everywhere) if args.run else _running(args.runs_dir)
    event = stacks.collect(run, "loratui stacks")
    if event is None:
        print(f"loratui: {run.run_id}: no trainer process is running; nothing to dump")
        return EXIT_NO
    print(stacks.render(event))
    print(f"\n(recorded in {run.events})")
    return EXIT_OK


def _running(runs_dir: Any) -> Any:
    """The one run whose trainer runs (several: refused with their ids); none running: the newest."""
    from loratui import rundir, runstatus
    from loratui.errors import UsageError

    running = [run for run in rundir.list_runs(runs_dir) if runstatus.read(run).alive]
    if len(running) > 1:
        raise UsageError(f"{len(running)} runs are running ({', '.join(r.run_id for r in running)}); name one")
    return running[0] if running else rundir.resolve(None, runs_dir)
