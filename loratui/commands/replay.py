"""`loratui replay RUN [RUN_B] [--speed X] [--from STEP] [--headless] [--summary]`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from loratui.text import inert

DESCRIPTION = """\
Play a recorded run back with the same panes and advice, or overlay two runs (A and B).

  --summary    print the run's JSON summary (losses, NaN steps, peaks, diagnoses) and exit; no TUI
  --headless   no TUI: print the progress line at --from (or the start of training), at each tenth of
               the steps after it, and the run's end, as `loratui run --headless` does

An events.jsonl is indexed once (events.idx beside it, which a run's supervisor keeps current as the run
goes; extended or rebuilt when the log changes), so a large log opens at once and summaries and seeks are
fast. A log written elsewhere is indexed by its first replay (about 2 minutes of CPU per GB)."""


def register(sub: Any, runs_dir: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the `replay` subcommand."""
    parser = sub.add_parser("replay", parents=[runs_dir], help="play a recorded run back (or compare two)",
                            description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", nargs="?", default=None,
                        help="run id, name or directory; an events.jsonl; a trainer_state.json, a Trainer output "
                             "directory or a Trainer stdout log (default: as attach, the running run, else the newest)")
    parser.add_argument("compare", nargs="?", default=None, help="a second run to overlay (B)")
    parser.add_argument("--speed", type=float, default=10.0, help="x1 … x1000 (default x10)")
    parser.add_argument("--from", dest="from_step", type=int, default=None,
                        help="start at this step (TUI and --headless; from 0 to the run's last step)")
    parser.add_argument("--headless", action="store_true", help="no TUI: print progress lines and the end")
    parser.add_argument("--summary", action="store_true", help="print the JSON summary and exit (no TUI)")
    return parser


def main(args: argparse.Namespace) -> int:
    """Open the replay, or print its summary or headless lines."""
    from loratui.errors import UsageError

    if not 1 <= args.speed <= 1000:
        raise UsageError(f"--speed {args.speed:g}: use a speed from 1 to 1000")
    if args.summary and args.from_step is not None:
        raise UsageError(f"--from {args.from_step}: the summary covers the whole run; drop --from "
                         "(or use --headless to print the run from a step on)")
    everywhere = _everywhere(args)  # runs started elsewhere too, unless --runs-dir narrows
    target = args.run
    if target is None:  # the viewer's default, as attach's: the run that is running, else the newest
        from loratui.runstatus import pick_run

        target = str(pick_run(None, args.runs_dir, need_running=False, everywhere=everywhere).path)
    opened = _open(target, args.runs_dir, everywhere)
    if args.summary:
        return _print_summary(opened, args.compare, args.runs_dir, everywhere)
    if args.from_step is not None:
        _check_from(args.from_step, opened)
    # Without a terminal (output to a file, a script) the app wrote its escape codes there and never ended:
    # the progress lines instead, as `run` and `attach` print them.
    if args.headless or not (sys.stdout.isatty() and sys.stdin.isatty()):
        return _print_headless(opened, args.from_step)
    return _run_app(opened, args, target)


class _Opened:
    """A log to replay: indexed (a file's index may still need `update`), its title, recipe and notes."""

    def __init__(self, log: Any, title: str, recipe: Any, notes: str, path: Path | None) -> None:
        self.log, self.title, self.recipe, self.notes, self.path = log, inert(title, False), recipe, notes, path
        header = log.source.first_event() if path is not None else (log.read(0, 1) or [None])[0]
        name, run_id = inert(getattr(header, "name", ""), False), inert(getattr(header, "run_id", ""), False)
        self.label = f"{name} ({run_id})" if name and run_id and name != run_id else (run_id or self.title)
        """`name (id)`: what tells two runs of one name apart."""

    def complete(self) -> Any:
        """The log with its index brought up to date (streams a file once; bounded memory)."""
        if not self.log.complete:
            self.log.update()
        return self.log

    def notes_text(self) -> str:
        return self.notes or self.log.notes_text()


def _everywhere(args: argparse.Namespace) -> bool:
    """Whether a run named by its id is looked for among every run the user started (no --runs-dir given)."""
    return bool(getattr(args, "everywhere", False))


def _open(target: str, runs_dir: Path, everywhere: bool = False) -> _Opened:
    """The log `target` names; bad input becomes one UsageError line."""
    from loratui import rundir
    from loratui.errors import UsageError
    from loratui.sources import importers
    from loratui.sources.logindex import IndexedLog
    from loratui.sources.open_any import locate_log, log_title, open_any

    if "/" in target and not Path(target).exists():
        raise UsageError(f"{target}: no such file or directory (replay takes a run id, a run directory, "
                         "an events.jsonl, a trainer_state.json, a Trainer output dir or a stdout log)")
    recipe = _recipe_of(target, runs_dir, rundir, everywhere)
    try:
        path = locate_log(target, runs_dir, everywhere)
        if path is not None:
            log = IndexedLog.of_file(path, recipe)
            if not _has_events(log):
                raise UsageError(f"{target}: the log holds no readable event; nothing to replay")
            return _Opened(log, log_title(path), recipe, "", path)
        found, notes, title = open_any(target, runs_dir, everywhere)
    except importers.ImportFailed as exc:
        raise UsageError(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{target}: cannot read ({exc})") from None
    if not found:
        raise UsageError(f"{target}: the log holds no readable event; nothing to replay")
    return _Opened(IndexedLog.of_list(found, recipe), title, recipe, notes, None)


def _has_events(log: Any) -> bool:
    """Whether the log's index (saved) or first block (read now) holds an event."""
    if log.n_events:
        return True
    from loratui import eventlog

    first = next(iter(log.source.blocks(0, eventlog.tally())), None)
    return first is not None and bool(first[1])


def _recipe_of(target: str, runs_dir: Path, rundir: Any, everywhere: bool = False) -> Any:
    """The run's recipe (its copy with its overrides), when the target is a run: advice then knows it."""
    path = Path(target)
    candidates = [rundir.RunDir(path), rundir.RunDir(path.parent)]
    try:
        candidates.append(rundir.resolve(target, runs_dir, everywhere))
    except rundir.RunNotFound:
        pass
    for run in candidates:
        if run.recipe.is_file():
            return run.load_recipe()[0]
    return None


def _check_from(step: int, opened: _Opened) -> None:
    """Refuse a --from outside the run's steps, naming the range."""
    from loratui.errors import UsageError
    from loratui.sources.logindex import last_step

    last = last_step(opened.path) if opened.path is not None else None
    if last is None:  # no step near the end of the file (or an import): ask the index
        values = opened.complete().index.step_values
        last = values[-1] if len(values) else 0
    if not 0 <= step <= last:
        raise UsageError(f"--from {step}: {opened.title} has steps 0 to {last}; give a step in that range")


def _run_app(opened: _Opened, args: argparse.Namespace, target: str) -> int:
    from loratui.tui.replay_app import replay_app

    compare, title = None, opened.title
    if args.compare:
        compare, title = compare_runs(opened, _open(args.compare, args.runs_dir, _everywhere(args)))
    app = replay_app(opened.log, opened.recipe, title, args.speed, args.from_step, compare, opened.notes,
                     follow=_still_written(target, args.runs_dir, _everywhere(args)))
    app.run()
    return 0


def compare_runs(opened: _Opened, other: _Opened) -> tuple[Any, str]:
    """(B's final state, the window title). Two runs may share a name: the legend and the title call them
    A and B, each with its id."""
    compare, _ = other.complete().fold_at(other.log.n_events)
    compare.name = f"B {other.label}"
    return compare, f"A {opened.label} · B {other.label}"


def _still_written(target: str, runs_dir: Path, everywhere: bool = False) -> bool:
    """Whether the run's supervisor is alive (its log still grows: the replay follows it)."""
    from loratui import rundir

    try:
        return rundir.resolve(target, runs_dir, everywhere).supervisor_pid() is not None
    except rundir.RunNotFound:
        return False


def _summary(opened: _Opened) -> dict[str, Any]:
    from loratui.logic.advisor.render import first_advice
    from loratui.logic.summary import summarize

    log = opened.complete()
    state, advisor = log.fold_at(log.n_events)
    items = advisor.items()
    return summarize(state, opened.notes_text(), [item.id for item in items], first_advice(items))


def _print_summary(opened: _Opened, compare: str | None, runs_dir: Path, everywhere: bool = False) -> int:
    summary = _summary(opened)
    if compare:
        summary = {"a": summary, "b": _summary(_open(compare, runs_dir, everywhere))}
    return _emit(json.dumps(summary, indent=2) + "\n")


def _print_headless(opened: _Opened, from_step: int | None) -> int:
    """The progress line at the start (or --from), at each tenth of the rest, and the end."""
    import io

    from loratui.sources.replay import Replay
    from loratui.text import terminal_width
    from loratui.tui.headless import bar_width, print_end, progress_line

    columns = terminal_width(sys.stdout)
    replay = Replay(opened.complete())
    last = replay.log.index.step_values[-1] if len(replay.log.index.step_values) else 0
    first = from_step if from_step is not None else 0
    out = io.StringIO()
    start = replay.index_of_step(first) if from_step is not None else replay.start_of_training()
    shown = [start] + [replay.index_of_step(first + (last - first) * k // 10) for k in range(1, 10)]
    states = [replay.state_at(index) for index in sorted(set(shown)) + [replay.n_events]]
    width = bar_width(states, columns)  # one for all: the bars line up
    for state in states:
        print(progress_line(state, width, columns), file=out)
    state, advisor = replay.log.fold_at(replay.n_events)
    print_end(state, out, advisor.items())
    if opened.notes_text():
        print(f"note: {opened.notes_text()}", file=out)
    return _emit(out.getvalue())


def _emit(text: str) -> int:
    """Print (a reader that went away, `| head -1`, is the CLI's to handle: it ends quietly)."""
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0
