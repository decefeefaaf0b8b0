"""Open whatever the user named for replay: a run (directory, id or name), an events.jsonl, or something
to import (a trainer_state.json, a Trainer output directory, a Trainer stdout log)."""

from __future__ import annotations

from pathlib import Path

from loratui import events, rundir
from loratui.eventlog import read_log
from loratui.nodelogs import merged_log


def open_any(target: str | Path, runs_dir: Path,
             everywhere: bool = False) -> tuple[list[events.AnyEvent], str, str]:
    """(events, notes on what was skipped, title) for a run or an importable path.

    Raises `rundir.RunNotFound` for a name that matches no run and `importers.ImportFailed` for a path
    that is none of the formats.
    """
    path = Path(target)
    if (events_path := _event_log_at(path)) is not None:
        contents = read_log(events_path)
        return contents.events, contents.notes(), _run_title(contents.events, events_path)
    if path.exists():
        from loratui.sources import importers  # only imports need it

        found = importers.import_path(path)
        header = found[0]
        return found, "", f"{getattr(header, 'name', path.name)} (imported from {path.name})"
    run = rundir.resolve(str(target), runs_dir, everywhere)
    contents = read_log(merged_log(run.path))
    return contents.events, contents.notes(), _run_title(contents.events, run.events)


def locate_log(target: str | Path, runs_dir: Path, everywhere: bool = False) -> Path | None:
    """The events.jsonl that `target` names (a run, its directory, a log); None for something to import.

    Raises `rundir.RunNotFound` for a name that matches no run.
    """
    path = Path(target)
    found = _event_log_at(path)
    if found is not None or path.exists():
        return found
    return merged_log(rundir.resolve(str(target), runs_dir, everywhere).path)


def _event_log_at(path: Path) -> Path | None:
    if (path / "events.jsonl").is_file():
        return merged_log(path)  # the run's own log, or every node's merged
    return path if path.is_file() and _is_event_log(path) else None


def _is_event_log(path: Path) -> bool:
    """Whether a file's first line is a loratui log header."""
    with open(path, "rb") as handle:
        first = handle.readline(1 << 16)
    return isinstance(events.decode_line(first), events.Header)


def _run_title(found: list[events.AnyEvent], events_path: Path) -> str:
    """The run id from the header, else the directory's name."""
    header = found[0] if found and isinstance(found[0], events.Header) else None
    return header.run_id if header and header.run_id else events_path.parent.name


def log_title(events_path: Path) -> str:
    """A log's title from its first line alone (a 1 GB log is not read to name it)."""
    with open(events_path, "rb") as handle:
        first = events.decode_line(handle.readline(1 << 16))
    return _run_title([first] if isinstance(first, events.Header) else [], events_path)
