"""The incremental reader of training text: feed it lines, get loratui events back.

It serves `doctor` (a pasted log), `import` (a stdout log or LLaMA-Factory's trainer_log.jsonl) and the
output of a watched command alike, so it never needs the whole text: a line in, the events it completes out,
with a bounded amount held back. Every fragment comes back as an `Output` (the advisor scans those for
tracebacks, OOMs and warnings); training records come back as `Log` events and the training bar's advances
as `Step` events.

Steps: a JSON record's `current_steps`, a dict's `global_step/max_steps` or own `step`, a line's own `step N`, a bare
`step loss` column (3 lines in a row, steps rising), else the training bar. The Trainer prints a dict with
`tqdm.write`, which redraws the bar right after it, so a dict waits for that redraw to learn its step; without
any bar, dicts are numbered in order (`inferred`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from loratui import events
from loratui.logic.clauses import cjk_spaced
from loratui.logic.text_reader import dialect, epochs, progress
from loratui.logic.text_reader import values as v
from loratui.text import inert

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_PREFIXED = re.compile(r"\s*\S.*\{")
"""Text before a printed dict on its line (a logger's time and name): a copy of the Trainer's own print; indentation
is no text (a paste indented as a block)."""
_KERAS_EPOCH = re.compile(r"^\s*Epoch\s+(\d{1,6})/(\d{1,6})\s*$")
_KERAS_COUNTER = re.compile(r"^\s*(\d{1,9})/(\d{1,9})\s+(?:\[[=>.]*\]|━+)")
_OWN_PROGRESS = re.compile(r"^\s*[a-z]{4,10}\s+(?:\[[#-]+\]\s+)?step \d+/(?:\d+|\?)\s+loss \S+\s+(?:avg )?tok/s \S+\s+VRAM ")
"""loratui's own headless progress line (`training  [###---] step 1943/4000  loss 2.9257  tok/s 90  VRAM no GPU
ETA 30m39s`): its loss is the last one logged, shown again on each line until the next log."""
MAX_LINE = 1 << 16
"""A longer physical line is cut: no training record is that long."""


@dataclass
class _Waiting:
    values: dict[str, float]
    prefixed: bool


@dataclass
class TextReader:
    """Lines of training text in, loratui events out (`feed`, then `close` at the end)."""

    stream: str = "stdout"
    bar_total: int = 0
    """The training bar's total (its max steps), once known."""
    counted_total: int = 0
    """The total of a loss line's step counter (`step 25/30 loss=...`): the max steps of a script with no bar."""
    inferred: bool = False
    """Some steps were numbered by line order (no bar, no explicit step)."""
    bar_elsewhere: bool = False
    """The bar is drawn on another stream than the records (a watched command's tqdm on stderr, its dicts on
    stdout), each read in its own turn: a record without its own step lies between the last record's step and the
    next redraw, not at that redraw."""
    evals_apart: bool = False
    """A loss line of an evaluation (`eval loss 2.31`, `[val] step 29 | loss nan`: `values.evaluation_loss`) is logged
    as the evaluation's `eval_loss` at the training's current step, as a Trainer's eval dict is, not as a training
    loss (a watched run's loss curve). Off, such a line's loss is the loss, as a pasted log printing only validation
    losses is judged by them (`doctor`)."""
    lines: int = 0
    step: int = 0
    _bar_n: int | None = None
    _bar_seen: bool = False
    _bar_offset: int = 0
    _bar_desc: str = ""
    _last_total: int = 0
    _waiting: list[_Waiting] = field(default_factory=list)
    _bar_loss: tuple[int, dict[str, float]] | None = None
    _bar_shown: tuple[int, dict[str, float]] | None = None  # (bar offset, values) of the last postfix read
    _held: tuple[int, dict[str, float], bool] | None = None  # (step, values, explicit) of the last loss line
    _own_loss: dict[str, float] | None = None  # the values of loratui's own last progress line
    _last_dict: tuple[int, dict[str, float], bool] | None = None
    _pairs: list[tuple[int, float]] = field(default_factory=list)  # bare `step value` lines not yet confirmed
    _pairs_on: bool = False  # 3 such lines in a row, steps rising, were seen: they are the loss column
    _pairs_total: bool = False  # those lines are a running total (elapsed time, tokens seen), not a loss
    _keras_epoch: int = 0  # the epoch of Keras' last `Epoch 3/10` line
    _epochs: epochs.EpochCounter = field(default_factory=epochs.EpochCounter)
    _early: list[events.AnyEvent] = field(default_factory=list)  # events of lines before this one, found by it
    prefix: dialect.LinePrefix = field(default_factory=dialect.LinePrefix)
    """The prefix every line of the text carries (torchrun's `[rank0]: `, a logger's time and level), stripped."""

    PAIRS_N = 3

    def feed(self, line: str, t: float = 0.0, unwrapped: bool = False) -> list[events.AnyEvent]:
        """Events completed by one physical line (it may hold `\\r` redraws); `unwrapped`: the caller stripped the
        text's line prefix already (`prefix.lookahead`, then `prefix.strip`), else it is learned and stripped here
        (the first lines may wait a line or two for it: `dialect.LinePrefix.live`)."""
        self.lines += 1
        if len(line) > MAX_LINE:
            line = line[:MAX_LINE]
        if unwrapped:
            return self._line(line, t)
        if not self.prefix.learning:  # decided (nothing is held then): one match where there is a prefix
            return self._line(self.prefix.strip(line), t)
        return [event for text, when in self.prefix.live(line, t) for event in self._line(text, when)]

    def _line(self, line: str, t: float) -> list[events.AnyEvent]:
        out: list[events.AnyEvent] = []
        fragments = [f for f in re.split(r"\r\n|\r|\n", line) if f.strip()]
        if _CONTROL.search(line):
            # Colours and cursor moves go; other control characters become visible (core `text.inert`).
            fragments = [g for g in (inert(f) for f in fragments) if g.strip()]
        for fragment in fragments:
            self._fragment(fragment, t, out)
        if fragments:
            out.insert(0, events.Output(t=t, stream=self.stream, lines=fragments))
        if self._early:
            out, self._early = self._early + out, []
        return out

    def close(self, t: float = 0.0) -> list[events.AnyEvent]:
        """Events still held back (dicts waiting for a bar, the last loss line)."""
        out = [event for text, when in self.prefix.flush() for event in self._line(text, when)]
        self._flush_waiting(None, t, out)
        self._release(t, out)
        return out

    # -- one fragment ------------------------------------------------------------------------------------

    def _fragment(self, fragment: str, t: float, out: list[events.AnyEvent]) -> None:
        """One fragment, read by the first reader it fits: a step/value pair of a column, a JSON record, a printed
        dict (after the bar it may follow), a bar's postfix, else the loss in text."""
        pair = v.step_value(fragment)
        if pair is not None:
            self._pair(pair, t, out)
            return
        if not self._pairs_on:
            self._pairs.clear()  # the lines must come in a row to be a column
            self._pairs_total = False
        record = v.json_record(fragment)
        if record is not None:
            self._json(record, t, out)
            return
        start = v.find_dict(fragment)
        bar = progress.find_bar(fragment[:start] if start >= 0 else fragment)
        if bar is not None:
            self._bar(bar, t, out)
        if start >= 0:
            numbers, texts = v.printed_dict(fragment[start:])
            numbers = v.epoch_train_loss(numbers)
            if v.is_record(numbers):
                self._dict(numbers, texts, bool(_PREFIXED.match(fragment[:start + 1])), t, out)
                return
        if bar is not None:
            self._bar_postfix(bar, fragment, t, out)
            return
        self._loss_text(fragment, t, out)

    def _loss_text(self, fragment: str, t: float, out: list[events.AnyEvent]) -> None:
        """A fragment that is no record, dict or bar: a Keras epoch header, a `step N ... loss X` line in any
        framework's spelling, or the losses a person lists in one line. Read spaced where Chinese, kana or Hangul
        touches a Latin word (`出现loss=nan的情况`), as the advisor reads every line (clauses.cjk_spaced)."""
        if not fragment.isascii():
            fragment = cjk_spaced(fragment)
        epoch = _KERAS_EPOCH.match(fragment)
        if epoch is not None:
            self._keras_epoch = int(epoch.group(1))
            return
        found = v.loss_line(fragment)
        if found is not None and _OWN_PROGRESS.match(fragment):
            if found[1] == self._own_loss:  # the same logged loss shown again, not a new reading of it (a log of
                return  # `loratui run --headless` read as "14 of the last 40 values were seen before")
            self._own_loss = found[1]
        if found is not None and self.evals_apart and v.evaluation_loss(fragment):
            self._release(t, self._early)  # the training's last loss line, printed before this one
            # Its own count may be the evaluation's batches (`val step 1 loss`): never before the training's step.
            step = max(found[0] or 0, self.step)
            self._emit(step, {"eval_loss": found[1]["loss"]}, t, out)
            return
        if found is not None:
            step, numbers = self._counted(fragment, found)
            self._loss_line(step if step is not None else self._keras_step(fragment), numbers, t, out)
            return
        named = v.named_evaluation_loss(fragment) if self.evals_apart else None
        if named is not None:  # `val_loss=2.2` alone: the evaluation's, as `eval loss 2.2` is
            self._release(t, self._early)
            self._emit(max(v.line_step(fragment) or 0, self.step), {"eval_loss": named}, t, out)
            return
        listed = v.loss_list(fragment)
        if listed:
            self._release(t, out)
            self.inferred = True
            for value in listed:  # a series the person lists in one line: one log each, in order
                self._emit(self.step + 1, {"loss": value}, t, out)
        elif self._held is not None and self._held[2]:
            # Other text after a `step N loss X` line: no second logger's copy of it comes now, so it is logged
            # (held until the output closed, a crash's traceback was read one step before the step it followed),
            # before this line's Output: it was printed before it (`Summoning checkpoint.` names the save after it).
            self._release(t, self._early)

    def _counted(self, fragment: str, found: tuple[int | None, dict[str, float]]) -> tuple[int | None,
                                                                                         dict[str, float]]:
        """A loss line's step and values, and the max steps its counter names; a counter beside an epoch of a total
        is read by what the series shows (`epochs.EpochCounter`), its epochs done added as the `epoch`."""
        within = v.within_epoch(fragment)
        if within is None:
            self.counted_total = self.counted_total or (v.line_total(fragment) or 0)
            return found[0], _with_epoch(found[1], v.line_epoch(fragment))
        reading = self._epochs.read(*within)
        self.counted_total = self.counted_total or (reading.total or 0)
        # Until the series tells which counter it is, the epochs done before this one (`line_epoch`) are all it says.
        epoch = reading.epoch if reading.epoch is not None else v.line_epoch(fragment)
        return reading.step, _with_epoch(found[1], epoch)

    def _keras_step(self, fragment: str) -> int | None:
        """Keras' `500/500 [====] - loss: 2.30` under `Epoch 3/10`: the batch counts from 1 again each epoch, so the
        run's step is the epochs before times the batches of one, plus this batch (epoch summaries then lie an
        epoch's steps apart, as they did in the run)."""
        counter = _KERAS_COUNTER.match(fragment) if self._keras_epoch else None
        if counter is None:
            return None
        n, total = int(counter.group(1)), int(counter.group(2))
        return (self._keras_epoch - 1) * total + n if 0 < n <= total else None

    def _json(self, record: dict[str, object], t: float, out: list[events.AnyEvent]) -> None:
        step, total, numbers = v.json_values(record)
        if total:
            self.bar_total = self.bar_total or total
        if not v.is_record(numbers):
            return
        self._release(t, out)
        if step is None:
            step, self.inferred = self.step + 1, True
        self._emit(step, numbers, t, out)

    def _dict(self, numbers: dict[str, float], texts: dict[str, str], prefixed: bool, t: float,
              out: list[events.AnyEvent]) -> None:
        """A printed Trainer dict: a train dict waits for its bar; eval and summary take the current step."""
        self._release(t, out)
        step, total = v.step_of(texts, numbers)
        if total:
            self.bar_total = self.bar_total or total
        if self._duplicate(numbers, prefixed):
            return
        if step is not None:
            self._flush_waiting(None, t, out)
            self._emit(step, numbers, t, out, prefixed)
            return
        if not v.is_train(numbers):
            self._flush_waiting(None, t, out)
            self._emit(self.step, numbers, t, out, prefixed)
            return
        self.inferred = self.inferred or not self._bar_seen
        self.bar_total = self.bar_total or self._last_total
        if not (self.bar_elsewhere and self._bar_seen):
            self._flush_waiting(None, t, out)  # two dicts with no redraw between: the first keeps the last bar
        self._waiting.append(_Waiting(numbers, prefixed))

    def _duplicate(self, numbers: dict[str, float], prefixed: bool) -> bool:
        """The same log printed twice, once by a logger and once bare (LLaMA-Factory's callback + Trainer)."""
        last = self._waiting[-1] if self._waiting else None
        before = (last.values, last.prefixed) if last else (self._last_dict[1:] if self._last_dict else None)
        if before is None or before[1] == prefixed or not v.is_train(numbers):
            return False
        old = before[0]
        same = all(_close(old.get(k), numbers.get(k)) for k in ("loss", "epoch", "learning_rate"))
        if same:
            old.update(numbers)  # keep the fuller record (grad_norm, more digits)
        return same

    def _bar(self, bar: progress.Bar, t: float, out: list[events.AnyEvent]) -> None:
        """A bar redraw: the training bar's moves the step; other bars are only remembered (a dataset's
        `Tokenizing train dataset: 400/400` never: its total is no run's step count)."""
        if bar.maybe_training:
            self._last_total = bar.total
        if not self.bar_total:
            if not (self._waiting and bar.maybe_training) and not (bar.maybe_training and bar.total > 1):
                return
            self.bar_total = bar.total
        if bar.total != self.bar_total:
            return
        if self._bar_n is not None and (bar.n + self._bar_offset < self._bar_n or self._next_bar(bar)):
            self._bar_offset = self._bar_n  # Lightning starts its bar again each epoch
        self._bar_desc = bar.desc
        n = bar.n + self._bar_offset
        advanced = self._bar_n is None or n > self._bar_n
        self._bar_seen, self._bar_n = True, n
        if self._waiting:
            self._flush_waiting(n, t, out)
        if advanced and n > 0:
            self.step = max(self.step, n)
            out.append(events.Step(t=t, step=n, epoch=0.0, step_time=bar.seconds_per_it or 0.0))

    def _next_bar(self, bar: progress.Bar) -> bool:
        """A finished bar drawn again under another description (`[Epoch 1/15]: 100%|...| 10000/10000` then
        `[Epoch 2/15]: 100%|...| 10000/10000`): the next epoch's bar, of which a pasted log keeps only the last
        redraw, not the same bar again."""
        return bar.n == bar.total and bar.n + self._bar_offset == self._bar_n and bar.desc != self._bar_desc

    def _bar_postfix(self, bar: progress.Bar, fragment: str, t: float, out: list[events.AnyEvent]) -> None:
        """A loss in a bar (Lightning's `loss=10.473` postfix, a `Loss: 0.97` description): one per step."""
        if bar.total != self.bar_total or self._bar_n is None:
            return
        found = v.loss_line(bar.desc + " " + bar.tail)
        shown = (self._bar_offset, found[1]) if found is not None else None
        if shown is not None and shown == self._bar_shown:
            return  # the same postfix redrawn as the bar moves (refreshed every N steps): one reading, not N
        self._bar_shown = shown
        pending = self._bar_loss
        if pending is not None and pending[0] != self._bar_n:
            self._bar_loss = None
            self._emit(pending[0], pending[1], t, out)
        if found is not None:
            self._bar_loss = (self._bar_n, found[1])

    def _loss_line(self, step: int | None, numbers: dict[str, float], t: float,
                   out: list[events.AnyEvent]) -> None:
        """A `step N ... loss X` line; the same step printed twice (two loggers) is one log."""
        explicit = step is not None
        if step is None:
            step = self._bar_n if self._bar_n is not None and self._bar_n > self.step else self.step + 1
            self.inferred = self.inferred or self._bar_n is None
        held = self._held
        if held is not None and held[0] == step and held[2] == explicit:
            held[1].update(numbers)
            return
        self._release(t, self._early)  # the step before, printed before this line
        self._held = (step, dict(numbers), explicit)
        self.step = max(self.step, step) if explicit else step

    def _pair(self, pair: tuple[int, float], t: float, out: list[events.AnyEvent]) -> None:
        """A bare `step value` line: a loss column once 3 come in a row with rising steps (one such line could be
        any two numbers); from then on each is a log."""
        if self._pairs_on:
            if pair[0] > self._last_step():
                self._release(t, out)
                self._emit(pair[0], {"loss": pair[1]}, t, out)
            return
        if self._pairs_total:
            return
        if self._pairs and pair[0] <= self._pairs[-1][0]:
            self._pairs.clear()
        self._pairs.append(pair)
        if len(self._pairs) >= self.PAIRS_N and _running_total(self._pairs):
            self._pairs_total = True
            self._pairs.clear()
        elif len(self._pairs) >= self.PAIRS_N:
            self._pairs_on = True
            self._release(t, out)
            for step, value in self._pairs:
                self._emit(step, {"loss": value}, t, out)
            self._pairs.clear()

    def _release(self, t: float, out: list[events.AnyEvent]) -> None:
        if self._bar_loss is not None:
            step, numbers = self._bar_loss
            self._bar_loss = None
            self._emit(step, numbers, t, out)
        if self._held is not None:
            step, numbers, _ = self._held
            self._held = None
            self._emit(step, numbers, t, out)

    def _flush_waiting(self, bar_n: int | None, t: float, out: list[events.AnyEvent]) -> None:
        """Give waiting dicts steps: the last one the bar's (or the next), earlier ones the steps before it."""
        if not self._waiting:
            return
        count = len(self._waiting)
        last = bar_n if bar_n is not None else (self._bar_n if self._bar_n is not None else self.step + count)
        # The bar's stream may be read ahead of the records': none lies past the bar's end (one placed late before
        # this shares the end with them rather than pass it).
        end = self.bar_total if self.bar_elsewhere and self.bar_total else None
        last = min(last, end) if end else last
        steps = self._spread(count, last) if self.bar_elsewhere else range(last - count + 1, last + 1)
        for step, waiting in zip(steps, self._waiting):
            step = max(step, self._last_step() + 1)
            self._emit(min(step, end) if end else step, waiting.values, t, out, waiting.prefixed)
        self._waiting.clear()

    def _spread(self, count: int, last: int) -> list[int]:
        """Records that waited together for a bar on another stream, spaced evenly between the last record's step
        and the bar's: a loop logging every k steps keeps its k (`logging_steps`), not k-1 records packed at the
        bar's position."""
        before = self._last_step()
        return [before + round((index + 1) * (last - before) / count) for index in range(count)]

    def _last_step(self) -> int:
        return self._last_dict[0] if self._last_dict else 0

    def _emit(self, step: int, numbers: dict[str, float], t: float, out: list[events.AnyEvent],
              prefixed: bool = False) -> None:
        if v.is_train(numbers):
            self._last_dict = (step, numbers, prefixed)
        self.step = max(self.step, step)
        out.append(events.Log(t=t, step=step, values={k: events.num_out(x) for k, x in numbers.items()}))


def _with_epoch(numbers: dict[str, float], epoch: float | None) -> dict[str, float]:
    """A loss line's values with the epoch it names under `epoch`, as a printed Trainer dict carries it."""
    if epoch is None or "epoch" in numbers:
        return numbers
    return {**numbers, "epoch": round(epoch, 4)}


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if a != a or b != b:
        return a != a and b != b
    return abs(a - b) <= 1e-4 + 1e-3 * abs(b)


TOTAL_SPREAD = 1.1
"""A running total's value over its step, equal from row to row within a tenth: it grows in step with the count."""


def _running_total(pairs: list[tuple[int, float]]) -> bool:
    """Whether bare `step value` rows are a running total, not a loss: a loss starts high and falls or wanders; a
    total (elapsed seconds, tokens or samples seen) starts near zero and grows at every row, in step with the count
    (transformers#1621's benchmark: `0 0.0029`, `100 0.286`, `200 0.469` seconds elapsed)."""
    values = [v for _, v in pairs]
    if not all(b > a for a, b in zip(values, values[1:])) or values[0] < 0:
        return False
    if values[0] <= 0.1 * values[-1]:
        return True
    rates = [v / s for s, v in pairs if s > 0]
    return len(rates) == len(pairs) and max(rates) <= TOTAL_SPREAD * min(rates)
