"""The app in replay: the same panes and advice, fed by a virtual clock over a recorded log."""

from __future__ import annotations

import time
from typing import Any

from textual import work
from textual.binding import Binding

from loratui.eventlog import LogTail
from loratui.logic import fmt
from loratui.logic.runstate import RunState
from loratui.recipe import Recipe
from loratui.sources.replay import Replay
from loratui.sources.runlog import ListSource
from loratui.logic.advice import Advisor
from loratui.tui.app import LoratuiApp
from loratui.tui.messages import EventsArrived, StateReplaced
from loratui.tui.widgets.loss_plot import LossPlot
from loratui.tui.widgets.vram import VramPane

TICK_S = 0.1


class ReplayApp(LoratuiApp):
    """Plays a recorded run at any speed; keys move through it. Nothing here can control a run."""

    BINDINGS = [
        Binding("space", "toggle_play", "play/pause"),
        Binding("plus,equals_sign", "faster", "faster"),
        Binding("minus", "slower", "slower"),
        Binding("right", "step(1)", "step→", show=False),
        Binding("left", "step(-1)", "←step", show=False),
        Binding("right_square_bracket", "note(1)", "next event"),
        Binding("left_square_bracket", "note(-1)", "prev event"),
        Binding("g", "jump_start", "start", show=False),
        Binding("G", "jump_end", "end", show=False),
    ]

    def __init__(self, replay: Replay, recipe: Recipe | None = None, title: str = "",
                 compare: RunState | None = None, start_step: int | None = None, note: str = "",
                 follow: LogTail | None = None) -> None:
        super().__init__(ListSource([], title=title), recipe, send=None)
        self.replay = replay
        self.follow = follow
        """The log's tail when the recorded run is still being written: new events join the replay."""
        self._ticks = 0
        self.compare = compare
        self.start_step = start_step
        self.note = note
        self._seeking = False

    def start_source(self) -> None:
        """Drive the replay from a timer instead of polling a file."""
        if self.compare is not None:
            self.query_one(LossPlot).compare = self.compare
            self.query_one(VramPane).compare = self.compare
        if self.start_step is not None:
            self._seek(self.replay.index_of_step(self.start_step))
        self.replay.clock.play(time.monotonic())
        self.set_interval(TICK_S, self._tick)

    def _tick(self) -> None:
        if self._seeking:
            return
        self._ticks += 1
        if self.follow is not None and self._ticks % 10 == 0:
            more = self.follow.poll()
            if more:
                self.replay.extend(more)
        due = self.replay.tick(time.monotonic())
        if due:
            self.post_message(EventsArrived(due, self.note))
        self._dirty = True  # the position in the status bar moves even without events

    def status_extra(self) -> str:
        clock = self.replay.clock
        position = clock.now(time.monotonic()) - self.replay.start_t
        total = self.replay.end_t - self.replay.start_t
        mark = "▶" if clock.playing else "❚❚"
        extra = f"REPLAY {mark} x{clock.speed:g} {fmt.duration(position)}/{fmt.duration(total)}"
        return f"{extra}  {self.note}" if self.note else extra

    # -- keys -------------------------------------------------------------------------------------

    def action_toggle_play(self) -> None:
        self.replay.clock.toggle(time.monotonic())
        self._dirty = True

    def action_faster(self) -> None:
        self.replay.clock.faster(time.monotonic())
        self._dirty = True

    def action_slower(self) -> None:
        self.replay.clock.slower(time.monotonic())
        self._dirty = True

    def action_step(self, delta: int) -> None:
        self.replay.clock.pause(time.monotonic())
        target = max(0, self.run_state.step + delta)
        self._seek(self.replay.index_of_step(target))

    def action_note(self, direction: int) -> None:
        index = self.replay.next_note() if direction > 0 else self.replay.prev_note()
        if index is None:
            self.notify("no more events of note that way", timeout=2)
            return
        self.replay.clock.pause(time.monotonic())
        self._seek(index)

    def action_jump_start(self) -> None:
        self._seek(0)

    def action_jump_end(self) -> None:
        self._seek(len(self.replay.events))

    @work(thread=True, exclusive=True, group="seek")
    def _seek(self, index: int) -> None:
        """Rebuild state and advice at `index` off the event loop, then swap them in."""
        self._seeking = True
        try:
            state = self.replay.seek(index, time.monotonic())
            advisor = Advisor(self.recipe).feed_all(self.replay.events[:self.replay.cursor])
            self.post_message(StateReplaced(state, advisor))
        finally:
            self._seeking = False


def replay_app(found: list[Any], recipe: Recipe | None, title: str, speed: float = 1.0,
               start_step: int | None = None, compare: RunState | None = None, note: str = "",
               follow: LogTail | None = None) -> ReplayApp:
    """A ReplayApp over `found` at `speed`, optionally starting at `start_step`."""
    replay = Replay(found)
    replay.clock.set_speed(speed, time.monotonic())
    return ReplayApp(replay, recipe, title, compare=compare, start_step=start_step, note=note, follow=follow)
