"""Loss tables: the table the Trainer draws in Jupyter (HTML in a saved notebook's outputs, or pasted as text
from a rendered one) and the `TrainOutput(...)` that `trainer.train()` returns.

transformers' `NotebookProgressCallback` draws `[30/30 26:06, Epoch 3/3]` and a table whose first column is
`Step` (or `Epoch` under an epoch eval strategy), then `Training Loss`, `Validation Loss` and the eval
metrics; "No log" fills a cell with no value. Unsloth and TRL add their own train columns (reward, kl, ...).
Pure: strings in, (step, values) out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from loratui.logic.text_reader import values as v

_PROGRESS = re.compile(r"\[\s*(\d+)/(\d+)[^\]\n]*?Epoch\s+([\d.]+)/(\d+)\s*\]")
_TRAIN_OUTPUT = re.compile(r"TrainOutput\(global_step=(\d+),\s*training_loss=([^,]+),\s*metrics=(\{[^}]*\})")
_SPLIT = re.compile(r"\t|\s{2,}|\s*\|\s*")
NAMES = {"step": "step", "epoch": "epoch", "training loss": "loss", "validation loss": "eval_loss",
         "learning rate": "learning_rate", "grad norm": "grad_norm", "train_loss": "loss", "valid_loss": "eval_loss",
         "trn_loss": "loss", "val_loss": "eval_loss", "train loss": "loss"}
"""The Trainer's columns, fastai's (`epoch train_loss valid_loss accuracy time`) and fastai 0.7's (`epoch trn_loss
val_loss accuracy`); a table a person prints of the logs (`Step  loss  grad_norm  reward_mean`) names its own."""
_NAME = re.compile(r"[A-Za-z_]+")
_ELIDED = re.compile(r"\s*(?:\.{3,}|…+|⋮)\s*")


@dataclass
class Table:
    """A loss table: its header and its rows of cells, and the progress line drawn above it."""

    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    spaced: bool = False  # cells apart by single spaces (fastai 0.7 prints `0 0.465021 0.354633 0.915533`)
    steps: int = 0  # the progress line's total steps
    epochs: float = 0.0  # and its total epochs

    def entries(self) -> list[tuple[int, dict[str, float]]]:
        """(step, values) a row: the train values, then the eval values as an entry of their own."""
        keys = [_key(name, any(h.lower() in ("validation loss", "valid_loss", "val_loss") for h in self.header))
                for name in self.header]
        out: list[tuple[int, dict[str, float]]] = []
        for row in self.rows:
            cells = {k: v.number(c) for k, c in zip(keys, row)}
            step = self._step(cells)
            if step is None:
                continue
            train = {k: x for k, x in cells.items() if x is not None and k not in ("step", "epoch")
                     and not k.startswith("eval_")}
            evals = {k: x for k, x in cells.items() if x is not None and k.startswith("eval_")}
            if cells.get("epoch") is not None:
                for group in (train, evals):
                    if group:
                        group["epoch"] = cells["epoch"]  # type: ignore[assignment]
            out += [(step, group) for group in (train, evals) if group]
        return out

    def _step(self, cells: dict[str, float | None]) -> int | None:
        """The row's step: its Step column, else its epoch at the progress line's steps per epoch."""
        step = cells.get("step")
        if step is None:
            epoch = cells.get("epoch")
            if epoch is None:
                return None
            # with no progress line (fastai's table), a row per whole epoch is its own step: epoch summaries
            step = epoch * self.steps / self.epochs if self.steps and self.epochs else \
                epoch + 1 if epoch == int(epoch) else None
            if step is None:
                return None
        return round(step) if 0 <= step < 1e12 else None  # NaN and inf fail both tests


class _Cells(HTMLParser):
    """Rows of cells of every <table> in an HTML fragment."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._row:
                self.tables[-1].append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def html_table(html: str) -> Table | None:
    """The loss table of one HTML output (the last table with a Training Loss column), or None."""
    if "raining" not in html:
        return None
    parser = _Cells()
    parser.feed(html)
    parser.close()
    found = None
    for rows in parser.tables:
        if rows and _is_header(rows[0]):
            found = Table(header=rows[0], rows=rows[1:])
    if found is not None:
        _progress(found, html)
    return found


class TextTables:
    """A loss table pasted as text, read line by line (bounded: one table's rows): a header line naming
    Training Loss, then rows of numbers (tab-, space- or pipe-separated), or the Trainer's HTML table copied from a
    notebook's output (`<table>` to `</table>`); `found` is the last such table."""

    MAX_ROWS = 100_000
    MAX_LINE = 2000
    """Longer lines are no loss table's header or row (a row of a few numbers, a header of a few names)."""
    MAX_HTML = 4 << 20
    """Characters of one pasted HTML table kept until its `</table>`: a longer one is given up (no loss table)."""

    def __init__(self) -> None:
        self.found: Table | None = None
        self._current: Table | None = None
        self._progress = ""
        self._html: list[str] | None = None  # the lines of a `<table>` not yet closed
        self._html_size = 0

    def feed(self, line: str) -> None:
        if self._html is not None or "<table" in line.lower():
            self._feed_html(line)
            return
        if len(line) > self.MAX_LINE:  # no table's header or row: not worth a split (a 100 kB line took 0.1 s)
            if self._current is not None and self._current.rows:
                self._current = None
            return
        if "Epoch" in line and _PROGRESS.search(line):
            self._progress = line
        cells = [c for c in _SPLIT.split(line.strip()) if c]
        words = line.split() if len(cells) == 1 else []
        spaced = len(words) > 1 and all(_NAME.fullmatch(w) for w in words) and _is_header(words, plain=False)
        if cells and _is_header(cells) or spaced:
            self._current = Table(header=words if spaced else cells, spaced=spaced)
            _progress(self._current, self._progress)
            return
        current = self._current
        if current is None or _ELIDED.fullmatch(line):
            return  # rows left out of a pasted table (`...`): the table goes on after them
        if current.spaced:
            cells = line.split()
        if cells and v.number(cells[0]) is not None and len(cells) <= len(current.header) and \
                len(current.rows) < self.MAX_ROWS:
            current.rows.append(cells)
            self.found = current
        elif cells and current.rows:
            self._current = None


    def _feed_html(self, line: str) -> None:
        """One line of a pasted HTML table: kept until `</table>`, then parsed with the progress line above it."""
        if self._html is None:
            self._html, self._html_size = [self._progress], 0
        self._html.append(line)
        self._html_size += len(line)
        if "</table" in line.lower():
            found = html_table("\n".join(self._html))
            self._html = None
            if found is not None and found.rows:
                self.found = found
        elif self._html_size > self.MAX_HTML:
            self._html = None


def text_table(lines: list[str]) -> Table | None:
    """The last loss table pasted as text in `lines`, or None."""
    tables = TextTables()
    for line in lines:
        tables.feed(line)
    return tables.found


def train_output(text: str) -> tuple[int, dict[str, float]] | None:
    """(global_step, metrics) of a printed `TrainOutput(global_step=.., training_loss=.., metrics={..})`."""
    found = _TRAIN_OUTPUT.search(text)
    if found is None:
        return None
    metrics, _ = v.printed_dict(found.group(3))
    loss = v.number(found.group(2))
    if loss is not None:
        metrics.setdefault("train_loss", loss)
    metrics.setdefault("train_runtime", 0.0)  # marks the end-of-training summary even without a runtime
    return int(found.group(1)), metrics


def _is_header(cells: list[str], plain: bool = True) -> bool:
    """A loss table's header: Step or Epoch first, a training loss among the columns; a bare `loss` column only
    where the cells stand apart (two spaces, a tab, a bar: `Step  loss  grad_norm`), since single spaces also part
    a sentence's words (`epoch loss is what I plot`)."""
    lowered = [c.lower() for c in cells]
    names = ("training loss", "train_loss", "trn_loss", "train loss") + (("loss",) if plain else ())
    return len(cells) >= 2 and lowered[0] in ("step", "epoch") and any(name in lowered for name in names)


def _progress(table: Table, text: str) -> None:
    found = None
    for found in _PROGRESS.finditer(text):
        pass
    if found is not None:
        table.steps, table.epochs = int(found.group(2)), float(found.group(4))


def _key(name: str, with_eval: bool) -> str:
    """A column's log key: the Trainer's names for its own columns; after a Validation Loss column the others
    are eval metrics (`eval_accuracy`), in a table without one they are train metrics (TRL's `reward`)."""
    lowered = " ".join(name.lower().split())
    if lowered in NAMES:
        return NAMES[lowered]
    key = re.sub(r"\s*/\s*", "/", lowered).replace(" ", "_")
    return f"eval_{key}" if with_eval else key
