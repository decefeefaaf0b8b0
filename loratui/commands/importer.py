"""`loratui import PATH`: a trainer_state.json, Trainer output directory or stdout log as a run directory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

RECIPE_STUB = "# Imported run: loratui did not start it, so there is no recipe.\n# Source: {source}\n"


def register(sub: Any, runs_dir_parent: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the `import` subparser."""
    cmd = sub.add_parser("import", parents=[runs_dir_parent],
                         help="import a trainer_state.json, Trainer output dir or stdout log as a run")
    cmd.add_argument("path", type=Path)
    cmd.add_argument("--name", default=None, help="run name (default: from the path)")
    return cmd


def main(args: argparse.Namespace) -> int:
    """Write the imported events as a new run directory; print its id, and the commands that open it."""
    from loratui.errors import UsageError
    from loratui.sources import importers

    try:
        found = importers.import_path(args.path)
    except importers.ImportFailed as exc:
        raise UsageError(str(exc)) from None
    run_id = write_run(found, args.path, args.runs_dir, args.name)
    print(run_id)  # alone on stdout, for `id=$(loratui import ...)`; what to do with it goes to stderr
    said = next((e.message for e in found if getattr(e, "key", "") == "import" and "; " in e.message), "")
    if said:  # how its times and steps were got, where the record does not say them itself
        print(f"note: {said.split('; ', 1)[1]}", file=sys.stderr)
    print(f"next: loratui replay {run_id}   (the app; --summary for JSON)\n"
          f"      loratui doctor {run_id}   (the advice)", file=sys.stderr)
    return 0


def write_run(found: list[Any], source: Path, runs_dir: Path, name: str | None) -> str:
    """A new run directory holding `found` as its events.jsonl; returns the run id."""
    import msgspec

    from loratui import events, rundir

    header = found[0]
    name = name or header.name or "imported"
    settings = rundir.RunSettings(run_id=rundir.new_run_id(name, now=header.t), name=name,
                                  recipe_source=str(source.resolve()))
    run = rundir.create(runs_dir, settings, RECIPE_STUB.format(source=source.resolve()))
    found = [msgspec.structs.replace(header, run_id=run.run_id, name=name)] + found[1:]
    # One write: nobody else appends to a run being imported, so EventWriter's locking buys nothing.
    run.events.touch(mode=0o600)  # the log is private, as EventWriter makes it
    run.events.write_bytes(b"".join(events.encode(event) for event in found))
    return run.run_id
