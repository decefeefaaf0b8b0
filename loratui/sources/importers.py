"""Turn what users already have into loratui events: a `trainer_state.json`, a Trainer output directory,
or a Trainer stdout log.

None of these record wall-clock times, so the events get plausible ones: the record ends at the file's
modification time and its steps are spread evenly over `train_runtime` (the end-of-training summary) or,
without one, one second a step. A Notice event says so, so replay never passes these times off as measured.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loratui import bounds, events
from loratui.logic.runstate import TIMES_ASSUMED
from loratui.sources import notebook, textfile

TRAIN_KEYS = frozenset({"loss", "grad_norm", "learning_rate"})
"""Keys that mark a Trainer log dict as a training-step log."""
SECONDS_PER_STEP = 1.0
"""Assumed step time when a record says nothing about time."""
ASSUMED = "times assume 1 s a step"
"""How such a record's times were found: drawn, not measured (RunState gives no duration, pace or ETA)."""
MAX_STEP = 10**9
"""The largest step number taken from a record (no run takes more): `step: 1e308` is damage, and its
times (a second a step) would fall before the epoch."""
MAX_STATE_BYTES = 256 << 20
"""The largest trainer_state.json read whole (a long run's is a few MB)."""


class ImportFailed(Exception):
    """A path that is none of the formats loratui can import; the message names it and says why."""


@dataclass
class Record:
    """What an imported file says, before it becomes events."""

    name: str
    source: str
    entries: list[tuple[int, dict[str, float]]] = field(default_factory=list)  # (step, values) in order
    max_steps: int = 0
    num_epochs: float = 0.0
    batch_size: int = 1
    checkpoints: list[tuple[int, str]] = field(default_factory=list)
    end_t: float = 0.0
    step_note: str = ""
    final_step: int = 0  # where the run ended when the record says (global_step), past its last log
    elapsed: dict[int, float] = field(default_factory=dict)  # step -> seconds since the start, where logged
    fit_done: bool = False
    """Lightning said the fit ran to its end ("`Trainer.fit` stopped: `max_epochs=3` reached.")."""
    logging_steps: int = 0
    """The logging interval the log prints (`logging_steps=10` of a printed TrainingArguments), 0 where it does not:
    the k-th of step-less dicts is then step k x logging_steps."""
    planned_steps: int = 0
    """The Trainer's `Total optimization steps = 80` (its banner at info level), 0 where it is not printed."""
    scheduler_end: tuple[str, str] = ("", "")
    """(Slurm's end, its job id) from slurmstepd's `*** JOB 12 ON node CANCELLED AT ... DUE TO TIME LIMIT ***` in a
    job's .out, when no training line follows it (a requeued job's log goes on)."""


def import_path(path: Path) -> list[events.AnyEvent]:
    """Events for a trainer_state.json, a Trainer output directory or a Trainer stdout log."""
    if path.is_dir():
        return to_events(read_output_dir(path))
    if not path.is_file():
        raise ImportFailed(f"{path}: no such file or directory")
    if textfile.utf16_header(path):
        raise ImportFailed(f"{path}: a loratui event log saved as UTF-16 (an editor re-saved it?); loratui reads "
                           f"UTF-8: convert a copy (iconv -f utf-16 -t utf-8 {path} > events.jsonl) and pass that")
    if _maybe_state(path):
        data = _state_bytes(path)
        whole = _json_object(data, path)
        if notebook.is_notebook(whole):
            return to_events(read_notebook(path, whole))
        if whole is not None:
            return to_events(read_trainer_state(path, data))
        broken = bad_json(path, data)
        if broken:
            raise ImportFailed(broken)
    return to_events(read_stdout_log(path))


JSON_DOCUMENTS = (".json", ".ipynb")
"""Files that are one JSON document by their name (trainer_state.json, a notebook): never a text log."""


def bad_json(path: Path, data: bytes | None = None) -> str:
    """For a .json or .ipynb file that does not parse: where and why, and what to do; else ""."""
    if path.suffix.lower() not in JSON_DOCUMENTS:
        return ""
    try:
        json.loads((data if data is not None else _state_bytes(path)).decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        return f"{path}: not UTF-8 text (byte {exc.start}); a {path.suffix} file is JSON, written as UTF-8"
    except json.JSONDecodeError as exc:
        fix = ("save the notebook again from Jupyter (or download it again) and pass that copy"
               if path.suffix.lower() == ".ipynb" else "fix it there, or take the copy in an earlier checkpoint-N/")
        return (f"{path}: bad JSON at line {exc.lineno} column {exc.colno} ({exc.msg}); a file cut short or "
                f"edited by hand: {fix}")
    except (RecursionError, ValueError, OSError, ImportFailed):
        return ""  # JSON, but deep, absurd or too large: the importer's own reading says which, in one line
    return ""


def _maybe_state(path: Path) -> bool:
    """Whether a file may be one JSON object (a trainer_state.json, a notebook): it opens with `{` and its first line
    is not a whole object by itself, as every line of a JSON-lines log is. Only then is it read whole."""
    with open(path, "rb") as handle:
        first = handle.readline(1 << 16).lstrip(b"\xef\xbb\xbf \t\r\n")
    if not first.startswith(b"{"):
        return False
    try:
        whole = json.loads(first.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        return True
    return isinstance(whole, dict) and ("log_history" in whole or "cells" in whole)  # a state or notebook on one line


def _state_bytes(path: Path) -> bytes:
    """A JSON file read whole, refused past MAX_STATE_BYTES."""
    size = path.stat().st_size
    if size > MAX_STATE_BYTES:
        raise ImportFailed(f"{path}: {size >> 20} MiB of JSON; a trainer_state.json is a few MB (over "
                           f"{MAX_STATE_BYTES >> 20} MiB is not read whole)")
    return bounds.read_bytes(path)  # a FIFO or device is refused, never waited on


def _json_object(data: bytes, path: Path) -> dict[str, Any] | None:
    """The whole file as one JSON object, or None (a stdout log whose first line is a dict is not one)."""
    try:
        whole = json.loads(data.decode("utf-8-sig"))
    except (ValueError, UnicodeDecodeError):  # the digit limit of int() is a ValueError too
        return None
    except RecursionError:
        raise ImportFailed(f"{path}: JSON nested deeper than any trainer_state.json; not a Trainer record") \
            from None
    return whole if isinstance(whole, dict) else None


# -- trainer_state.json ------------------------------------------------------------------------------


def read_trainer_state(path: Path, data: bytes | None = None, name: str = "") -> Record:
    """A Record from a `trainer_state.json` of any transformers 4.x/5.x era."""
    raw = data if data is not None else _state_bytes(path)
    try:
        # Python's json reads the NaN and Infinity that the Trainer's json.dump writes for a NaN loss.
        state = json.loads(raw.decode("utf-8-sig"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ImportFailed(f"{path}: not valid JSON ({bounds.clip(str(exc), 300)})") from None
    except RecursionError:
        raise ImportFailed(f"{path}: JSON nested deeper than any trainer_state.json; not a Trainer record") \
            from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise ImportFailed(f"{path}: JSON, but not a Trainer trainer_state.json (no log_history list)")
    record = Record(name=name or _name_for(path), source=str(path), end_t=path.stat().st_mtime)
    record.entries = _history_entries(history)
    last = max((s for s, _ in record.entries), default=0)
    record.final_step = _int(state.get("global_step"))  # the run ends here, not at its last logged step
    record.max_steps = _int(state.get("max_steps")) or record.final_step or last
    record.num_epochs = _float(state.get("num_train_epochs")) or _float(state.get("epoch")) or 0.0
    record.batch_size = _int(state.get("train_batch_size")) or 1
    return record


def _history_entries(history: list[Any]) -> list[tuple[int, dict[str, float]]]:
    """(step, numeric values) of each log_history entry; an entry without a step takes the last one's."""
    entries: list[tuple[int, dict[str, float]]] = []
    step = 0
    for item in history:
        if not isinstance(item, dict):
            continue
        step = _int(item.get("step")) if item.get("step") is not None else step
        values = {k: v for k, v in ((k, _float(v)) for k, v in item.items() if k != "step") if v is not None}
        if values:
            entries.append((step, values))
    return entries


def _name_for(path: Path) -> str:
    """A run name: the output directory's name, not `checkpoint-60` or the file's own name."""
    folder = path.parent if path.is_file() else path
    if folder.name.startswith("checkpoint-"):
        folder = folder.parent
    return folder.name or "imported"


# -- a Trainer output directory ------------------------------------------------------------------------


def read_output_dir(path: Path) -> Record:
    """A Record from the newest trainer_state.json of an output directory (by global step)."""
    numbered = ((_checkpoint_step(p), p) for p in path.glob("checkpoint-*") if p.is_dir())
    checkpoints = sorted((step, p) for step, p in numbered if step is not None)
    candidates = [p / "trainer_state.json" for _, p in checkpoints] + [path / "trainer_state.json"]
    states = [p for p in candidates if p.is_file()]
    if not states:
        raise ImportFailed(f"{path}: a directory without trainer_state.json or checkpoint-*/trainer_state.json;"
                           " pass a run directory, an events.jsonl, a trainer_state.json or a stdout log")
    records = [read_trainer_state(p, name=_name_for(path.resolve())) for p in states]
    # The top-level file comes last, so on a tie it wins: save_state() adds the end-of-training summary.
    best = max(range(len(records)), key=lambda i: (_last_step(records[i]), i))
    record = records[best]
    record.checkpoints = [(step, str(p)) for step, p in checkpoints]
    return record


def _checkpoint_step(path: Path) -> int | None:
    """N of `checkpoint-N`, or None for other names."""
    match = re.fullmatch(r"checkpoint-(\d+)", path.name)
    return int(match.group(1)) if match else None


def _last_step(record: Record) -> int:
    return max((s for s, _ in record.entries), default=0)


# -- a Trainer stdout log, LLaMA-Factory's trainer_log.jsonl or running_log.txt, axolotl/TRL/Lightning output


def read_stdout_log(path: Path) -> Record:
    """A Record from training text, read by the one text reader (`logic.text_reader`), line by line."""
    from loratui.logic.text_reader import TextReader
    from loratui.sources import textfile

    record = Record(name=_log_name(path), source=str(path), end_t=path.stat().st_mtime)
    reader = TextReader()
    broken = JsonLines()
    try:
        with open(path, "rb") as handle:
            for line in textfile.lines(handle):
                broken.see(line)
                _take(record, reader.feed(line))
                _take_elapsed(record, line)
                _take_scheduler_end(record, line)
                _take_plan(record, line)
                record.fit_done = record.fit_done or bool(_FIT_DONE.search(line))
    except textfile.BinaryFile:
        raise ImportFailed(f"{path}: a binary file, not a log") from None
    if broken.all_broken():
        raise ImportFailed(f"{path}:{broken.first_line}: a JSON record that does not parse ({broken.first_error}), "
                           "and the file has no other: cut short or edited by hand; fix that line, or use an uncut "
                           "copy of the log")
    _take(record, reader.close())
    if not record.entries:
        _from_tables(record, path)
    if not record.entries and not broken.lines:  # "none of: events.jsonl, ..." of a file with nothing in it
        raise ImportFailed(f"{path}: empty, nothing to import; pass the training's log (its stdout, a Slurm job's "
                           ".out), a trainer_state.json or a Trainer output directory")
    if not record.entries:
        raise ImportFailed(f"{path}: none of: events.jsonl, trainer_state.json, Trainer output directory,"
                           " training log (no logged dict like {'loss': ...}, trainer_log.jsonl record or"
                           " `step N ... loss X` line found)")
    if reader.inferred:
        _fill_steps_without_bars(record)
    record.max_steps = _max_steps(record, reader.bar_total)
    return record


def _max_steps(record: Record, *said: int) -> int:
    """The run's step count as the record says it (a progress bar's total, a summary's), 0 when it does not. The
    last step seen is no step count: a Slurm job's .out cut at its time limit was imported as finished at step 40
    of 40; it is that only for a run that finished (its summary printed)."""
    known = max(record.max_steps, *said)
    last = _last_step(record)
    if known < last:
        return last if _finished(record) else 0
    return known


class JsonLines:
    """Counts a log's lines that open a JSON object (`{"`) but do not parse: a file made of nothing else is broken
    JSON, not a log (the text reader would read `{"loss": 1` as a step). A cut last line among good ones is a kill's
    doing and is read as it is."""

    def __init__(self) -> None:
        self.number = self.lines = self.broken = self.first_line = 0
        self.first_error = ""
        self._decoder = json.JSONDecoder()

    def see(self, line: str) -> None:
        self.number += 1
        text = line.strip()
        if not text:
            return
        self.lines += 1
        if not text.startswith('{"'):
            return
        try:
            self._decoder.raw_decode(text)  # a record, whatever follows it on the line (a progress bar)
        except (ValueError, RecursionError) as exc:
            self.broken += 1
            if not self.first_line:
                why = f"{exc.msg} at column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else "too deep"
                self.first_line, self.first_error = self.number, why

    def all_broken(self) -> bool:
        return 0 < self.broken == self.lines


_LOGGING_STEPS = re.compile(r"\blogging_steps\s*[=:]\s*['\"]?(\d+)\b")
_PLANNED_STEPS = re.compile(r"Total optimization steps\s*=\s*([\d,]+)")


def _take_plan(record: Record, line: str) -> None:
    """The logging interval and the planned step count, where the log prints them (the first said of each)."""
    if "logging_steps" in line and not record.logging_steps:
        found = _LOGGING_STEPS.search(line)
        record.logging_steps = int(found.group(1)) if found else 0
    if "optimization steps" in line and not record.planned_steps:
        found = _PLANNED_STEPS.search(line)
        record.planned_steps = int(found.group(1).replace(",", "") or 0) if found else 0


_FIT_DONE = re.compile(r"`Trainer\.fit` stopped: `max_(?:epochs|steps)=\d+` reached")
"""Lightning's last word when a fit ran to its end: its bars give no run's step count, this says it finished."""


def _take_scheduler_end(record: Record, line: str) -> None:
    """slurmstepd's line of a job's end (see `Record.scheduler_end`); a training line after it clears it."""
    from loratui.logic.text_reader import progress

    record.scheduler_end = progress.job_end_so_far(record.scheduler_end if record.scheduler_end[0] else None, line) \
        or ("", "")


def _take_elapsed(record: Record, line: str) -> None:
    """LLaMA-Factory's trainer_log.jsonl records say when they were written: "elapsed_time": "0:01:23"."""
    if '"elapsed_time"' not in line:
        return
    from loratui.logic.text_reader.values import json_record, json_values

    raw = json_record(line)
    step = json_values(raw)[0] if raw is not None else None
    seconds = _clock(raw.get("elapsed_time")) if raw is not None else None
    if step is not None and seconds is not None:
        record.elapsed[step] = seconds


def _clock(text: object) -> float | None:
    """Seconds of an "H:MM:SS" (or "D day(s), H:MM:SS") duration, or None."""
    found = re.fullmatch(r"(?:(\d+) days?, )?(\d+):(\d\d):(\d\d(?:\.\d+)?)", text.strip()) \
        if isinstance(text, str) else None
    if found is None:
        return None
    days, hours, minutes, seconds = found.groups()
    return int(days or 0) * 86400 + int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def _from_tables(record: Record, path: Path) -> None:
    """A Trainer loss table pasted as text from a rendered notebook, and its TrainOutput line."""
    from loratui.logic.text_reader import table
    from loratui.sources import textfile

    with open(path, "rb") as handle:
        lines = [line for _, line in zip(range(200_000), textfile.lines(handle))]
    found = table.text_table(lines)
    if found is None and any("<table" in line for line in lines):  # a notebook exported to Markdown/HTML
        found = table.html_table("\n".join(lines))
    if found is not None:
        record.entries = found.entries()
        record.max_steps = max(record.max_steps, found.steps)
    _train_output(record, "\n".join(line for line in lines if "TrainOutput(" in line))


def _train_output(record: Record, text: str) -> None:
    """TrainOutput(global_step=.., metrics={..}): the run's end and its summary."""
    from loratui.logic.text_reader import table

    summary = table.train_output(text)
    if summary is not None and record.entries:
        step, metrics = summary
        record.entries.append((step, metrics))
        record.final_step = max(record.final_step, step)


# -- a Jupyter notebook (.ipynb) -----------------------------------------------------------------------


def read_notebook(path: Path, document: dict[str, Any]) -> Record:
    """A Record from a saved notebook's outputs: the Trainer's HTML loss table (the last one drawn), else the
    printed dicts and bars of its streams; `TrainOutput(...)` gives the end. Unsloth, Colab and Kaggle runs
    are kept this way."""
    from loratui.logic.text_reader import TextReader, table

    record = Record(name=path.stem or "notebook", source=str(path), end_t=path.stat().st_mtime)
    reader, last_table, plain = TextReader(), None, []
    for text, kind in notebook.outputs(document):
        if kind == notebook.HTML:
            last_table = table.html_table(text) or last_table
        elif kind == notebook.PLAIN:
            plain.append(text)
        for line in text.splitlines() if kind != notebook.HTML else []:
            _take(record, reader.feed(line))
    _take(record, reader.close())
    if last_table is not None and last_table.rows:
        record.entries = last_table.entries()
        record.max_steps = last_table.steps
    elif record.entries and reader.inferred:
        _fill_steps_without_bars(record)
    _train_output(record, "\n".join(plain))
    if not record.entries:
        raise ImportFailed(f"{path}: a notebook whose outputs hold no training log (no Trainer loss table, "
                           "printed log dict or TrainOutput); run the training cell and save the notebook "
                           "with its outputs")
    record.max_steps = _max_steps(record, reader.bar_total, record.final_step)
    return record


def _log_name(path: Path) -> str:
    """A run name: LLaMA-Factory's fixed file names say nothing, their folder does."""
    if path.name in ("trainer_log.jsonl", "running_log.txt") and path.parent.name:
        return path.parent.name
    return path.stem or "imported"


def _take(record: Record, found: list[events.AnyEvent]) -> None:
    for event in found:
        if isinstance(event, events.Log):
            values = {k: v for k, v in ((k, events.num_in(x)) for k, x in event.values.items()) if v is not None}
            record.entries.append((event.step, values))


def _fill_steps_without_bars(record: Record) -> None:
    """Without bars, the steps come from what the log says: each dict's epoch over the summary's step count, the
    logging interval it prints (the k-th dict is step k x logging_steps), the summary's step count spread over the
    dicts; else the dicts are numbered in line order, and the note says those are no trainer's steps."""
    summary = next((v for _, v in record.entries if events.is_train_summary(v)), None)
    n_train = sum(1 for _, v in record.entries if TRAIN_KEYS & v.keys() and not events.is_train_summary(v))
    runtime, rate = (summary.get("train_runtime", 0.0), summary.get("train_steps_per_second", 0.0)) if summary \
        else (0.0, 0.0)
    total = round(runtime * rate) if math.isfinite(runtime * rate) else 0
    if total and _place_by_epoch(record, total, summary):
        return
    if record.logging_steps > 1:
        every = record.logging_steps
        record.step_note = f"steps from the log's logging_steps={every} (the log names no step)"
    elif total and n_train:
        every = max(1, round(total / n_train))
        record.step_note = (f"steps spread over the summary's {total} steps in line order"
                            + (f" (every {every} steps)" if every > 1 else ""))
    else:
        every = 1
        record.step_note = (f"the log names no step (no progress bar, no logging_steps, no summary): its {n_train} "
                            "training logs are numbered 1, 2, 3... in line order, not the trainer's steps"
                            if record.logging_steps != 1 else "steps from the log's logging_steps=1")
    if every > 1:
        record.entries = [(step * every, values) for step, values in record.entries]
    record.max_steps = total or record.planned_steps  # the summary's (runtime x rate), else unknown: `_max_steps`


def _place_by_epoch(record: Record, total: int, summary: dict[str, float] | None) -> bool:
    """Step-less dicts that each carry their epoch, with the run's steps known (the summary's runtime x rate): each
    at epoch x steps an epoch. Line order would spread them over the whole run, wrong wherever the logs do not
    start at its start (a resumed run, a log's head cut off) or are not evenly spaced. False: left to line order."""
    epochs = [v.get("epoch") for _, v in record.entries if v is not summary]
    last = (summary or {}).get("epoch") or (epochs[-1] if epochs else None)
    if not epochs or None in epochs or not last or not all(0 <= e <= last for e in epochs):  # type: ignore[operator]
        return False
    per_epoch = total / last
    placed, previous = [], 0
    for _, values in record.entries:
        step = round(values["epoch"] * per_epoch) if values is not summary else total
        if TRAIN_KEYS & values.keys() and values is not summary:
            step = max(step, previous + 1)  # two logs whose rounded epochs meet: one step apart
        previous = max(previous, step)
        placed.append((step, values))
    record.entries = placed
    record.step_note = f"steps placed by each log's epoch ({per_epoch:g} steps an epoch)"
    record.max_steps = max(total, _last_step(record))
    return True


# -- a Record as events ---------------------------------------------------------------------------------


def to_events(record: Record) -> list[events.AnyEvent]:
    """The Record as a loratui event list: header, train begin, steps and logs, phases, end."""
    from loratui.logic.text_reader.values import is_eval  # the text reader's own test: one meaning of an eval log

    clock, how = _timing(record)
    out = _opening(record, clock(0), how)
    previous = 0
    at = {step: path for step, path in record.checkpoints}
    for step, values in record.entries:
        t = clock(step)
        if is_eval(values):
            out += _eval_events(t, step, values)
            continue
        if step > previous and TRAIN_KEYS & values.keys() and not events.is_train_summary(values):
            out.append(_step(record, clock, previous, step, values.get("epoch", 0.0)))
            out += [events.Checkpoint(t=t, step=s, path=at.pop(s)) for s in sorted(at) if s <= step]
            previous = step
        out.append(events.Log(t=t, step=step, values=_nums(values)))
    if record.final_step > previous:  # trained past its last log: global_step, TrainOutput
        epoch = next((v["epoch"] for _, v in reversed(record.entries) if "epoch" in v), 0.0)
        out.append(_step(record, clock, previous, record.final_step, epoch))
        previous = record.final_step
    out += [events.Checkpoint(t=record.end_t, step=s, path=p) for s, p in sorted(at.items())]
    return out + _closing(record, previous)


def _step(record: Record, clock: Any, previous: int, step: int, epoch: float) -> events.Step:
    """The Step event closing steps previous+1..step; its step_time is one step's share of their time (a
    log every 10 steps is not one 10-step-long step: that made the ETA 10 times too long)."""
    return events.Step(t=clock(step), step=step, epoch=epoch,
                       step_time=(clock(step) - clock(previous)) / max(step - previous, 1))


def _timing(record: Record) -> tuple[Any, str]:
    """(the time at each step, how the times were found): the log's own elapsed times (LLaMA-Factory's
    elapsed_time) where it has them, else spread evenly over train_runtime, else 1 s a step."""
    last = max(_last_step(record), 1)
    marks = sorted(record.elapsed.items())
    if marks and marks[-1][1] > 0:
        end_step, end_s = marks[-1]
        start = record.end_t - end_s
        known = [(0, 0.0)] + [m for m in marks if m[0] > 0]
        rate = end_s / end_step if end_step else SECONDS_PER_STEP

        def clock(step: int) -> float:
            if step >= end_step:
                return start + end_s + (step - end_step) * rate
            (s0, e0), (s1, e1) = next((a, b) for a, b in zip(known, known[1:]) if b[0] >= step)
            return start + e0 + (e1 - e0) * (step - s0) / max(s1 - s0, 1)

        return clock, "times from the log's elapsed_time"
    runtime = next((v["train_runtime"] for _, v in record.entries if events.is_train_summary(v)), None)
    per_step = runtime / last if runtime and math.isfinite(runtime) and runtime > 0 else SECONDS_PER_STEP
    begin = record.end_t - per_step * last
    how = "times spread evenly over train_runtime" if _finished(record) else ASSUMED
    return (lambda step: begin + step * per_step), how


def _opening(record: Record, start: float, how: str) -> list[events.AnyEvent]:
    note = f"imported from {record.source}; {how}" + (f"; {record.step_note}" if record.step_note else "")
    return [
        events.Header(t=start, schema=events.SCHEMA_VERSION, run_id=record.name, recipe_hash="",
                      recipe_path=record.source, name=record.name),
        events.Notice(t=start, level="info", message=note, key="import"),
        *([events.Notice(t=start, level="info", key=TIMES_ASSUMED,
                         message="the record holds no times: no duration, pace or ETA is given for it")]
          if how == ASSUMED else []),
        events.TrainBegin(t=start, max_steps=record.max_steps, num_epochs=record.num_epochs,
                          batch_size=record.batch_size),
        events.State(t=start, state=events.TRAINING, step=0),
        events.Phase(t=start, name="train", edge="begin"),
    ]


def _eval_events(t: float, step: int, values: dict[str, float]) -> list[events.AnyEvent]:
    """An eval entry as the phase it was: begin, the eval log, end (at one instant: its span is unknown)."""
    return [events.Phase(t=t, name="eval", edge="begin", step=step),
            events.Log(t=t, step=step, values=_nums(values)),
            events.Phase(t=t, name="eval", edge="end", step=step)]


def _closing(record: Record, last_step: int) -> list[events.AnyEvent]:
    """Train end and End: finished when the summary is there or max_steps was reached, else stopped."""
    t = record.end_t
    if _finished(record) or (record.max_steps and last_step >= record.max_steps):
        return [events.Phase(t=t, name="train", edge="end", step=last_step),
                events.End(t=t, state=events.FINISHED, step=last_step)]
    message = f"the record ends at step {last_step} of {record.max_steps or '?'}"
    cause, job = record.scheduler_end
    if cause:  # Slurm's own line says who ended it, as a live run records it (supervisor/owner.py)
        from loratui import slurm

        return [events.Notice(t=t, level="info", message=message, key="import"),
                slurm.ended_event(cause, job, t, last_step)]
    return [events.Notice(t=t, level="info", message=message, key="import"),
            events.End(t=t, state=events.STOPPED, step=last_step)]


def _finished(record: Record) -> bool:
    return record.fit_done or any(events.is_train_summary(v) for _, v in record.entries)


def _nums(values: dict[str, float]) -> dict[str, events.Num]:
    return {k: events.num_out(v) for k, v in values.items()}


def _float(value: Any) -> float | None:
    """A float from a JSON or printed value; NaN and infinities kept, anything else None."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _int(value: Any) -> int:
    """A count or step from a record; 0 for anything not a number from 0 to MAX_STEP."""
    number = _float(value)
    return int(number) if number is not None and 0 <= number <= MAX_STEP else 0
