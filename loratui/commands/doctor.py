"""`loratui doctor PATH [--json]`: diagnose a run directory, an events.jsonl, or a pasted log/traceback.

A run directory is read through its recipe copy and event log, so the advice is the same as the live
panel's. Any other file (or `-`, standard input) is read as training text by the one text reader
(`logic.text_reader`): streamed line by line, so a 100 MB log takes bounded memory, each line decoded on its
own so mixed encodings cannot stop it. Exit codes follow `errors`: 1 when an ERROR is printed.
Imports stay light here: this module loads whenever the CLI parses.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


def register(sub: Any, runs_dir_parent: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the `doctor` subparser."""
    doctor = sub.add_parser("doctor", parents=[runs_dir_parent],
                            help="diagnose a run, its events.jsonl, or a pasted log or traceback")
    doctor.add_argument("path", help="a run directory, run id, events.jsonl, a text log/traceback file, a Trainer "
                        "output directory or trainer_state.json, or - (standard input)")
    doctor.add_argument("--json", action="store_true", help="print the advice as a JSON list")
    doctor.add_argument("--no-guess", action="store_true",
                        help="only what a rule reads in the text: no word model's guess where none does")
    return doctor


def main(args: argparse.Namespace) -> int:
    """Print the advice for `args.path`: exit 1 when it holds an ERROR, 0 otherwise, 2 on bad input."""
    from loratui.errors import EXIT_NO, EXIT_OK, UsageError

    if args.path == "-":
        if sys.stdin.isatty():  # typed `loratui doctor -`: say what it waits for, where the paste goes
            print("paste the log or traceback, then Ctrl-D on a line of its own (Ctrl-C cancels)", file=sys.stderr)
        items, note = diagnose_stream(sys.stdin.buffer, "standard input", guess=not args.no_guess)
        source: Path | str = "-"
    else:
        runs_dir, everywhere = getattr(args, "runs_dir", None), getattr(args, "everywhere", False)
        found = _resolve(Path(args.path), runs_dir, everywhere)
        source = found
        try:
            items, note = diagnose(found, guess=not args.no_guess)
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{found}: cannot read it ({exc})") from None
    if args.json:
        import json

        print(json.dumps([item.to_dict() for item in items], indent=2, default=str))
    else:
        print(render(items, source, note, _terminal_width()))
        print(_apply_hint(items, source), end="")
    return EXIT_NO if any(item.severity == "error" for item in items) else EXIT_OK


def _apply_hint(items: list[Any], source: Path | str) -> str:
    """For a run directory whose advice has a change `A` writes: the `loratui apply` line that writes it from the
    shell ('' for a pasted text or a log, which have no recipe to copy)."""
    fixable = [item for item in items if getattr(item, "fix", None)]
    if not fixable or not isinstance(source, Path) or not (source / "events.jsonl").is_file():
        return ""
    import shlex

    from loratui.text import inert

    return (f"\napply: loratui apply {inert(shlex.quote(str(source)), newlines=False)} {fixable[0].id}   (a copy of "
            "the run's recipe with that change; --restart also restarts the run with it)\n")


def _resolve(path: Path, runs_dir: Path | None, everywhere: bool = False) -> Path:
    """The run directory or file PATH names: a path first, else a run id under --runs-dir, by the rule
    attach and replay use (a name that fits several runs is refused with the candidates)."""
    from loratui.errors import UsageError

    if path.is_dir() or path.is_file() or path.is_fifo():  # a pipe: `loratui doctor <(kubectl logs pod)`
        return path
    if path.exists():
        raise UsageError(f"{path}: not a file (a device or socket); pass a log or traceback's file, a run directory, "
                         "or - and pipe the text in")
    if runs_dir is None or path.name != str(path):
        raise UsageError(f"{path}: no such file, run directory or run id")
    from loratui import rundir

    try:
        return rundir.resolve(str(path), runs_dir, everywhere).path
    except rundir.RunNotFound as exc:
        raise UsageError(f"{path}: no such file or directory, and as a run id: {exc}") from None


def diagnose(source: Path, guess: bool = False) -> tuple[list[Any], str]:
    """The advice for a run directory, an event log or a text file, and a note on what was read; `guess`: a text
    file where no rule finds a problem may get the word model's guess (the CLI's default; off, the rules alone)."""

    if source.is_dir():
        log = source / "events.jsonl"
        if not log.is_file():  # a Trainer's output_dir (checkpoint-N/trainer_state.json), as `import` reads it
            return _from_import(source)
        from loratui.nodelogs import merged_log

        return _from_events(merged_log(source), _run_recipe(source))  # every node's log of a multi-node run
    if source.is_fifo():  # read once, as it streams: no peeking at its first bytes (they would be gone)
        with open(source, "rb") as handle:
            return diagnose_stream(handle, str(source), guess)
    if source.name == "events.jsonl" or _looks_like_events(source):
        return _from_events(source, _run_recipe(source.parent))
    from loratui.sources import textfile

    if textfile.utf16_header(source):
        from loratui.errors import UsageError

        raise UsageError(f"{source}: a loratui event log saved as UTF-16 (an editor re-saved it?); loratui "
                         f"reads UTF-8: convert a copy (iconv -f utf-16 -t utf-8 {source} > events.jsonl) and "
                         "pass that")
    from loratui.sources.importers import bad_json

    broken = bad_json(source)
    if broken:  # a trainer_state.json or notebook that does not parse: say where, not "no problems found"
        from loratui.errors import UsageError

        raise UsageError(broken)
    if source.suffix.lower() == ".json":  # a trainer_state.json: its log_history, not its lines as text
        found = _from_trainer_state(source)
        if found is not None:
            return found
    if source.suffix == ".ipynb":
        found = _from_notebook(source)
        if found is not None:
            return found
    with open(source, "rb") as handle:
        return diagnose_stream(handle, str(source), guess)


NOTHING_TO_JUDGE = ("no loss value, step or error line in it, so nothing to judge: for a run, paste the run's log "
                    "or traceback")
"""Said where a text held no problem and no series either (a question, a short complaint): not a healthy run."""


def diagnose_stream(handle: IO[bytes], name: str, guess: bool = False) -> tuple[list[Any], str]:
    """The advice for training text read from a binary stream, line by line (bounded memory); `guess` as for
    `diagnose`."""
    from loratui import slurm
    from loratui.errors import UsageError
    from loratui.logic.advisor import Advisor
    from loratui.logic.text_reader import TextReader, progress
    from loratui.logic.text_reader.table import TextTables
    from loratui.logic.text_reader.dialect import without_code_span_edge
    from loratui.logic.word_guess import MAX_CHARS
    from loratui.sources import textfile

    advisor, reader, tables = Advisor(None, pasted=True), TextReader(stream="stderr"), TextTables()
    logged, blank, kept, size = False, True, [], 0
    ended: tuple[str, str] | None = None  # slurmstepd's word on the job's end, with no training line after it
    last_step = 0
    try:
        for line in _unwrapped(textfile.lines(handle), reader.prefix):
            line = without_code_span_edge(line)  # a forum's inline code span around pasted lines
            blank = blank and not line.strip()
            if size <= MAX_CHARS:  # the text itself, for the word model's guess: pasted excerpts, not whole logs
                kept.append(line)
                size += len(line) + 1
            tables.feed(line)
            if not line.strip():
                advisor.blank_line()
            ended = progress.job_end_so_far(ended, line)  # a requeued job's log goes on
            for event in reader.feed(line, unwrapped=True):
                if type(event).__name__ == "Log":
                    logged, last_step = True, max(last_step, event.step)
                advisor.feed(event)
    except textfile.BinaryFile:
        raise UsageError(f"{name}: a binary file (NUL bytes), not a log; pass a text log, a traceback, "
                         "an events.jsonl or a run directory") from None
    if blank:  # "no problems found" in nothing: an empty paste (Ctrl-D too soon) or the wrong file
        raise UsageError(f"{name}: empty, no text to diagnose; " + {
            "standard input": "paste the log or traceback, then Ctrl-D, or pipe it in: loratui doctor - < train.log",
            "pasted text": "paste the log or traceback"}.get(name, "pass the log or traceback's file, or a run "
                                                                   "directory"))
    for event in reader.close():
        if type(event).__name__ == "Log":
            logged, last_step = True, max(last_step, event.step)
        advisor.feed(event)
    if ended is not None:  # a job's .out: Slurm's own line says who ended it, as a live run records it
        advisor.feed(slurm.ended_event(*ended, 0.0, last_step))
    if not logged and tables.found is not None:  # a notebook's loss table pasted as text: its rows are the logs
        advisor.feed_all(_table_logs(tables.found))
    from loratui.logic.fmt import count

    items = advisor.items()
    # a text that prints its own training logs (a loss series, a loss table, fp16's loss scaler backing off) was
    # judged by them, and they outrank words (advisor/rank.py's ladder): the guess is for prose and tracebacks
    series = logged or tables.found is not None or bool(advisor.text.scale_line)
    items = _with_guess(items, "\n".join(kept), series) if guess else items
    note = f"{count(reader.lines, 'line')} read as training text (no recipe)"
    if not items and not series:  # issue 23: no evidence either way is not "healthy"; say so, guess nothing
        note += f"; {NOTHING_TO_JUDGE}"
    elif logged and reader.inferred and any(item.step for item in items):  # `(step 28)` would read as the run's
        note += "; it prints no step numbers, so a step here is a log's place in the text"
    return items, note


def _unwrapped(lines: Iterator[str], prefix: Any) -> Iterator[str]:
    """The lines without the prefix they share (torchrun's `[rank0]: `, a logger's time and level, a quote's `> `:
    logic/text_reader/dialect.py), learned from the text's first lines, which wait until it is decided (bounded:
    `WINDOW` nonblank lines), so every reader of the lines, the word model's text included, reads them as printed."""
    from loratui.logic.text_reader.dialect import WINDOW

    head: list[str] = []
    nonblank = 0
    for line in lines:
        if not prefix.learning:
            yield prefix.strip(line)
            continue
        head.append(line)
        nonblank += bool(line.strip())
        if nonblank >= WINDOW or len(head) >= 4 * WINDOW:
            prefix.lookahead(head)
            yield from (prefix.strip(held) for held in head)
            head = []
    if head:
        prefix.lookahead(head)
        yield from (prefix.strip(held) for held in head)


def _with_guess(items: list[Any], text: str, series: bool = False) -> list[Any]:
    """The word model's guess first (logic/word_guess.py says how it was measured): where no rule found a problem
    and the text is no training log (`series`: its numbers were judged); where the rules' first item is a catch-all
    (an exception of no known kind, an OOM with no phase) and the words read as a more specific kind; or where it is
    an OOM whose kind nothing read settled (then the words say what held the memory). Then the arbiter
    (logic/arbiter.py) may put another answer first, weighing the rules' answer against the words."""
    from loratui.logic.advisor.core import ASKS_NORMAL
    from loratui.logic.advisor.oom_advice import host_memory, kind_unsettled
    from loratui.logic import word_guess
    from loratui.logic.categories import answer_category

    if answer_category(items) == "healthy" and ASKS_NORMAL.search(text):
        # G5: no rule found a problem and the person asks whether what they see is normal: the maintainers' answer is
        # most often yes, and there the words named a problem wrongly more often than rightly on text neither the
        # word model nor the arbiter had read (the dev texts of waves 89-117 that ask: 36 -> 41 of 54, healthy
        # 19 -> 26, data_starved -2); on older waves, which the word model had read, they were right more often
        # (143 -> 132 of 147). docs/learned_fallback.md, twenty-ninth session
        return items
    first = items[0] if items else None
    memory = first is not None and kind_unsettled(first)
    # the host's RAM read from its own kill or words (advice id `exception`) is no catch-all: no GPU kind refines it
    catch_all = first.id if first is not None and first.id in word_guess.REFINES and not host_memory(first) else None
    spoke = any(item.severity in ("error", "warning") for item in items) or (first is not None and
                                                                             first.id == "data_starved")
    plain = not (spoke or series)
    from loratui.logic.arbiter import arbitrated
    from loratui.sources.word_model import load, load_arbiter

    model = load()
    reading = word_guess.read(model, text) if model is not None else None
    if model is None or reading is None:
        return items
    found = word_guess.first_guess(reading, catch_all, memory, plain)
    guessed = items if found is None else [word_guess.advice(found[0], model.records, found[1]), *items]
    arbiter = load_arbiter()
    return _host_named(guessed if arbiter is None else arbitrated(arbiter, items, guessed, reading, series), text)


def _host_named(items: list[Any], text: str) -> list[Any]:
    """G7: an OOM of the card that only the words or the person's own word for it put first (no message's numbers) is
    the host's RAM where the text names the host's memory and no GPU or other accelerator anywhere."""
    from loratui.logic.advisor.oom_advice import host_phase_advice, kind_unsettled
    from loratui.logic.advisor.oom_fold import host_told
    from loratui.logic.categories import answer_category
    from loratui.logic.fmt import quoted
    from loratui.logic.word_guess import GUESS_TITLE

    first = items[0] if items else None
    if first is None or not answer_category(items).startswith("oom_") or \
            not (kind_unsettled(first) or first.title.startswith(GUESS_TITLE)):
        return items
    line = host_told(text)
    if not line:
        return items
    rest = [item for item in items if item is not first and not kind_unsettled(item)]
    return [host_phase_advice("", quoted(line), ["no GPU or other accelerator is named anywhere in the text"], 0),
            *rest]


def _table_logs(table: Any) -> list[Any]:
    from loratui import events

    return [events.Log(t=0.0, step=step, values={k: events.num_out(x) for k, x in values.items()})
            for step, values in table.entries()]


def _from_notebook(path: Path) -> tuple[list[Any], str] | None:
    """A saved notebook read through its outputs (streams, tracebacks, the Trainer's loss table), not its
    JSON; None when the file is no notebook (then it is read as text)."""
    import json

    from loratui import bounds
    from loratui.logic.advisor import Advisor
    from loratui.sources import notebook

    try:
        document = json.loads(bounds.read_bytes(path, limit=256 << 20).decode("utf-8-sig"))
    except (ValueError, UnicodeDecodeError, RecursionError, OSError):
        return None  # no notebook loratui can read as one: it is read as text
    if not notebook.is_notebook(document):
        return None
    found = notebook.text_events(document)
    items = Advisor(None, pasted=True).feed_all(found).items()
    return items, f"{len(notebook.outputs(document))} notebook outputs read (no recipe)"


def _from_import(source: Path) -> tuple[list[Any], str]:
    """A directory with no events.jsonl read as `loratui import` reads it (a Trainer output directory's newest
    trainer_state.json); one that holds none is bad input, said in one line."""
    from loratui.errors import UsageError
    from loratui.sources import importers

    try:
        found = importers.import_path(source)
    except importers.ImportFailed:
        raise UsageError(f"{source}: no events.jsonl (a loratui run) and no trainer_state.json (a Trainer output "
                         "directory, or its checkpoint-N/) in it; pass one of those, or a log or traceback file, "
                         "or - for a paste") from None
    return _imported(found, "a Trainer output directory's trainer_state.json")


def _from_trainer_state(path: Path) -> tuple[list[Any], str] | None:
    """A trainer_state.json judged by its log_history (as `import` reads it); None for any other JSON (read as
    text). Read as text, its indented `"loss": NaN,` lines were "nothing to judge"."""
    from loratui.sources import importers

    try:
        whole = importers.read_trainer_state(path)
    except (importers.ImportFailed, OSError, ValueError, RecursionError):
        return None
    return _imported(importers.to_events(whole), "a trainer_state.json's log_history")


def _imported(found: list[Any], what: str) -> tuple[list[Any], str]:
    from loratui.logic.advisor import Advisor

    steps = sum(1 for event in found if type(event).__name__ == "Log")
    return Advisor(None).feed_all(found).items(), f"{steps} logs read from {what} (no recipe)"


def _from_events(log: Path, recipe: Any) -> tuple[list[Any], str]:
    from loratui.eventlog import read_log
    from loratui.logic.advisor import Advisor

    if not log.is_file():
        raise OSError(f"{log} is not a file")
    contents = read_log(log)
    items = Advisor(recipe).feed_all(contents.events).items()
    note = f"{len(contents.events)} events read" + ("" if recipe else ", no usable recipe.toml")
    extra = contents.notes()
    return items, note + (f"; {extra}" if extra else "")


def _looks_like_events(path: Path) -> bool:
    """Whether a file's first line is an event-log header."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline(4096)
    except OSError:
        return False
    return first.startswith(b"{") and b'"kind":"header"' in first.replace(b" ", b"")


def _run_recipe(run_path: Path) -> Any:
    """The recipe of the run in `run_path` (its copy with its overrides), or None (an imported run has
    none: its advice must not quote default settings)."""
    from loratui.rundir import RunDir

    return RunDir(run_path).load_recipe()[0]


def _terminal_width() -> int | None:
    """The terminal's columns when standard output is one, else None: a pipe or a file gets whole lines."""
    from loratui.text import terminal_width

    return terminal_width(sys.stdout) or None


def _fit(text: str, width: int | None) -> str:
    """Each line wrapped to `width` under its own indent (an evidence line's under its text, past the "- "):
    the terminal broke a long headline or quoted error mid-word at 80 columns."""
    if not width:
        return text
    from loratui.text import wrap_line

    out = []
    for line in text.split("\n"):
        body = line.lstrip(" ")
        indent = " " * (len(line) - len(body) + (2 if body.startswith("- ") else 0))
        out.append(wrap_line(line, max(width - 1, 20), indent) if len(line) >= width else line)
    return "\n".join(out)


def render(items: list[Any], source: Path | str, note: str, width: int | None = None) -> str:
    """The advice as plain text, most important first; quoted input is made inert for the terminal; lines
    wrapped to `width` columns when given (a terminal's)."""
    from loratui.logic.advisor.render import change_line
    from loratui.text import inert

    source = inert(str(source), newlines=False)  # a path: a run directory's name is anyone's choice
    if not items:
        return _fit(f"{source}: no problems found ({inert(note)})", width)
    lines = [f"{source}: {len(items)} finding{'s' if len(items) > 1 else ''} ({note})"]
    for item in items:
        # Step 0 is no step: a pasted thread or a log without step numbers (a finding before the first step
        # of a recorded run says so in its own title).
        at = f"  (step {item.step})" if item.step else ""
        lines.append(f"\n{item.severity.upper():<8}{item.id}{at}\n  {inert(item.title)}")
        lines += [f"    - {inert(line)}" for line in item.evidence]
        if item.change:
            lines.append("  change: " + change_line(item.change))
    return _fit("\n".join(lines), width)


def _toml(value: Any) -> str:
    """A value as it would be written in the recipe (the one TOML value writer)."""
    from loratui.logic.recipe_edit import toml_value

    return toml_value(value)
