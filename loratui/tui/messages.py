"""Messages from sources to the app, named as facts."""

from __future__ import annotations

from typing import Any

from textual.message import Message

from loratui import events
from loratui.logic.runstate import RunState


class EventsArrived(Message):
    """New events were read from the run's log (live, attach) or reached by the replay clock."""

    def __init__(self, found: list[events.AnyEvent], note: str = "", caught_up: bool = False) -> None:
        super().__init__()
        self.events = found
        """The events, in log order."""
        self.note = note
        """What the reader skipped, or ''."""
        self.caught_up = caught_up
        """The reader is at the log's end: the whole history is in (a paused CPU run writes nothing more)."""


class StateReplaced(Message):
    """A replay seek rebuilt the run's state and advice at another point of the log (or an attach took them from the
    run's saved index: `recent` then holds the events an away card reads)."""

    def __init__(self, state: RunState, advisor: Any, recent: list[Any] | None = None) -> None:
        super().__init__()
        self.recent = recent
        self.state = state
        """The folded state at the new position."""
        self.advisor = advisor
        """The advisor folded to the same position."""
