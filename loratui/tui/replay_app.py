"""The app in replay: the same panes and advice, fed by a virtual clock over a recorded log.

The threading rule is the live path's: workers compute and post, handlers on the event loop apply. The
first frame shows the log's header; the index worker then loads the saved index (60 MB for a 1 GB log) or
builds one, and follows a run still being written; the seek worker folds state and advice at the target
from the nearest checkpoint and posts `Moved`; only the handler moves the cursor and swaps the panes'
state. The clock's tick runs on the event loop, so it folds what it read at once: a posted batch could be
folded after a `Moved` it predates, on top of the state at the seek's target.
"""

from __future__ import annotations

import time
from typing import Any

from textual import on, work
from textual.binding import Binding
from textual.message import Message

from loratui.logic import fmt
from loratui.logic.advisor import Advisor
from loratui.logic.runstate import RunState
from loratui.recipe import Recipe
from loratui.sources.logindex import IndexedLog
from loratui.sources.replay import Replay
from loratui.sources.runlog import ListSource
from loratui.sources.snapshot import note_label
from loratui.tui.app import LoratuiApp
from loratui.tui.messages import EventsArrived, StateReplaced
from loratui.tui.screens import TextScreen
from loratui.tui.widgets.loss_plot import LossPlot
from loratui.tui.widgets.vram import VramPane

TICK_S = 0.1
FOLLOW_S = 1.0
"""How often the index looks for events appended to a run still being written."""

HELP = """\
loratui replay — keys (escape closes this page)

  space  play / pause
  + / -  faster / slower (x1 … x1000)
  → / ←  one step forward / back
  ] / [  next / previous event of note (failure, NaN,
         pause, eval, a saved checkpoint)
  g / G  start of training / end of the record
  l      show/hide the trainer's output
  t      loss ↔ learning rate / grad norm
  a      focus the advice panel (enter: evidence)
  q      quit
  ?      this help

A replay only reads the log: it cannot pause, save or
stop a run (`loratui attach` can)."""


class Moved(Message):
    """A seek's worker folded state and advice at `index`; the handler moves the cursor there, unless a
    later seek (`seek` is its number) was asked for since."""

    def __init__(self, state: RunState, advisor: Advisor, index: int, play: bool = False, seek: int = 0) -> None:
        super().__init__()
        self.state, self.advisor, self.index, self.play, self.seek = state, advisor, index, play, seek


SPEED_KEYS = Binding.Group("speed", compact=True)
EVENT_KEYS = Binding.Group("event", compact=True)
ENDS_KEYS = Binding.Group("start/end", compact=True)


class ReplayApp(LoratuiApp):
    """Plays a recorded run at any speed; keys move through it. Nothing here can control a run."""

    BINDINGS = [  # grouped and short: with the viewer's own keys, every hint fits 80 columns
        Binding("space", "toggle_play", "play"),
        Binding("minus", "slower", "slower", group=SPEED_KEYS),
        Binding("plus,equals_sign", "faster", "faster", group=SPEED_KEYS),
        Binding("right", "step(1)", "step→", show=False),
        Binding("left", "step(-1)", "←step", show=False),
        Binding("left_square_bracket", "note(-1)", "prev event", group=EVENT_KEYS),
        Binding("right_square_bracket", "note(1)", "next event", group=EVENT_KEYS),
        Binding("g", "jump_start", "start", group=ENDS_KEYS),
        Binding("G", "jump_end", "end", group=ENDS_KEYS),
    ]

    def __init__(self, replay: Replay, recipe: Recipe | None = None, title: str = "",
                 compare: RunState | None = None, start_step: int | None = None, note: str = "",
                 follow: bool = False) -> None:
        super().__init__(ListSource([], title=title), recipe, send=None)
        self.replay = replay
        self.follow = follow
        """The recorded run is still being written: the index follows the log's growth."""
        self.compare = compare
        self.start_step = start_step
        self._seeks = 0
        """How many seeks were asked for: a `Moved` from an earlier one is dropped."""
        self._aim: int | None = None
        """Where the seek still on its way goes, when known at once: `]` typed right after `g` steps from there."""
        self._aim_step: int | None = None
        """The step a step seek still on its way goes to: `→` pressed again before it lands steps on from there."""
        self.note = self.import_note = note

    def start_source(self) -> None:
        """Drive the replay from a timer instead of polling a file."""
        if self.compare is not None:
            self.query_one(LossPlot).compare = self.compare
            self.query_one(LossPlot).names = self.source.title  # "A name (ID) · B name (ID)"
            self.query_one(VramPane).compare = self.compare
        head = self.replay.head()
        if head:  # the header at the first frame (name, GPUs); the index loads or builds behind it
            self._fold(EventsArrived(head, self.note))
        if not self.replay.log.complete:
            if self.follow:
                self.replay.log.follower = True  # saved now and then: its supervisor's indexer saves too
            self._index()
        if self.start_step is not None:
            self._seek("step", self.start_step, play=True)
        else:
            self.replay.clock.play(time.monotonic())
        self.set_interval(TICK_S, self._tick)

    @work(thread=True, exclusive=True, group="index")
    def _index(self) -> None:
        """Index the log behind the first frame; then, for a run still being written, follow it."""
        while self.replay.log.update(self._stop_polling) and self.follow:
            if self._stop_polling.wait(FOLLOW_S):
                return

    def _tick(self) -> None:
        due = self.replay.tick(time.monotonic())
        note = self.import_note or self.replay.log.notes_text()
        if due or note != self.note:
            # Folded now, not posted: the events were read at the cursor as it is now, and a seek's
            # `Moved` already queued would move the cursor before a posted batch was folded, leaving
            # the early events folded on top of the state at the seek's target.
            self._fold(EventsArrived(due, note))
        self._dirty = True  # the position in the status bar moves even without events

    def status_extra(self) -> str:
        clock, log = self.replay.clock, self.replay.log
        mark = "▶" if clock.playing else "❚❚"
        extra = f"REPLAY {mark} x{clock.speed:g} {self._position()}"
        if log.loading:
            extra += " (loading the index)"
        elif not log.complete and not self.follow:
            extra += f" (indexing {log.index.end_pos / max(1, log.source.size()):.0%})"
        return f"{extra}  {self.note}" if self.note else extra

    def _position(self) -> str:
        """Where the replay is: its time of the record's, or, for a record with no times of its own (an import
        whose steps were drawn a second apart), its step of the record's last."""
        if self.run_state.times_assumed:
            steps = self.replay.log.index.step_values
            return f"step {self.run_state.step}/{steps[-1] if steps else 0} (no times recorded)"
        position = self.replay.clock.now(time.monotonic()) - self.replay.start_t
        return f"{fmt.duration(position)}/{fmt.duration(self.replay.end_t - self.replay.start_t)}"

    # -- keys -------------------------------------------------------------------------------------

    def action_help(self) -> None:
        self.push_screen(TextScreen(HELP))  # the replay's keys only: the live ones do nothing here

    def action_toggle_play(self) -> None:
        wall = time.monotonic()
        if self.replay.clock.playing:
            due = self.replay.pause(wall)
            if due:  # folded now, as a tick folds: the state at the time the bar shows
                self._fold(EventsArrived(due, self.note))
        else:
            self.replay.clock.play(wall)
        self._dirty = True

    def action_faster(self) -> None:
        self.replay.clock.faster(time.monotonic())
        self._dirty = True

    def action_slower(self) -> None:
        self.replay.clock.slower(time.monotonic())
        self._dirty = True

    def action_step(self, delta: int) -> None:
        self.replay.clock.pause(time.monotonic())
        base = self._aim_step if self._aim_step is not None else self.run_state.step
        self._seek("step", max(0, base + delta))

    def action_note(self, direction: int) -> None:
        index = self.replay.next_note(self._aim) if direction > 0 else self.replay.prev_note(self._aim)
        if index is None:
            self.notify("no more events of note that way" + ("" if self.replay.log.complete else
                                                               " yet (still indexing)"), timeout=2)
            return
        self.replay.clock.pause(time.monotonic())
        self._seek("index", index)
        self.say(note_label(self.replay.read(index - 1, index)[0])[:200], timeout=3)

    def action_jump_start(self) -> None:
        self._seek("start", 0)

    def action_jump_end(self) -> None:
        if not self.replay.log.complete:
            self.notify("indexing the log: the end shows when it is read", timeout=3)
        self._seek("end", 0)

    # -- seeking ----------------------------------------------------------------------------------

    def _seek(self, kind: str, value: int, play: bool = False) -> None:
        """Seek to a target: numbered here, on the event loop, so only the latest seek's result lands (an
        exclusive worker cannot stop a thread already folding: a slow `G` could land after a quick `g`)."""
        self._seeks += 1
        self._aim = self._target_now(kind, value)
        self._aim_step = value if kind == "step" else None
        self._fold_target(kind, value, play, self._seeks)

    def _target_now(self, kind: str, value: int) -> int | None:
        """The seek's target where the index already gives it (None: only the worker, waiting, can tell)."""
        replay, log = self.replay, self.replay.log
        if kind == "index":
            return value
        if kind == "step" and replay.step_indexed(value):
            return replay.index_of_step(value)
        if kind == "start" and log.n_events:
            return replay.start_of_training()
        return log.n_events if kind == "end" and log.complete else None

    @work(thread=True, exclusive=True, group="seek")
    def _fold_target(self, kind: str, value: int, play: bool, seek: int) -> None:
        """Fold state and advice at the target off the event loop (waiting for the index to reach it,
        on a log still being indexed), then post them; `_moved` applies them."""
        index = self._target(kind, value)
        if index is None:
            return
        state, advisor = self.replay.fold_at(index)
        self.post_message(Moved(state, advisor, index, play, seek))

    def _target(self, kind: str, value: int) -> int | None:
        """The cursor a seek goes to; None when the app closed while waiting for the index."""
        replay, log = self.replay, self.replay.log
        if kind == "end" or (kind == "step" and not replay.step_indexed(value)):
            while not (replay.step_indexed(value) if kind == "step" else log.complete):
                if self._stop_polling.is_set():
                    return None
                log.wait_for(log.n_events + 1, timeout=0.2)
        if kind == "step":
            return replay.index_of_step(value)
        if kind == "start":
            log.wait_for(1)
            return replay.start_of_training()
        return value if kind == "index" else log.n_events

    @on(Moved)
    def _moved(self, message: Moved) -> None:
        if self._stop_polling.is_set() or message.seek != self._seeks:
            return  # the app closed (its panes are gone), or a later seek was asked for
        wall = time.monotonic()
        self._aim = self._aim_step = None  # the cursor is there now
        self.replay.move_to(message.index, wall)
        if message.play:
            self.replay.clock.play(wall)
        LoratuiApp._replace(self, StateReplaced(message.state, message.advisor))


def replay_app(found: list[Any] | IndexedLog, recipe: Recipe | None, title: str, speed: float = 1.0,
               start_step: int | None = None, compare: RunState | None = None, note: str = "",
               follow: bool = False) -> ReplayApp:
    """A ReplayApp over `found` (events, or an indexed log) at `speed`, optionally from `start_step`."""
    replay = Replay(found, recipe=recipe)
    replay.clock.set_speed(speed, time.monotonic())
    return ReplayApp(replay, recipe, title, compare=compare, start_step=start_step, note=note, follow=follow)
