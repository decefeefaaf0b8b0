"""The troubleshooting side panel: the advisor's items, most important first; enter shows evidence."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from loratui.logic.advisor.render import change_lines
from loratui.text import inert

SEVERITY_MARKS = {"error": ("✖", "bold red"), "warning": ("▲", "bold yellow"), "info": ("●", "cyan")}


def change_text(change: dict[str, Any]) -> str:
    """A change as the user would type it: `key = value` lines."""
    return "\n".join(change_lines(change))  # the advisor's one rendering (logic/advisor/render.py)


class AdvicePanel(OptionList):
    """Lists advice items; `enter` asks the app to show one item's evidence."""

    class EvidenceRequested(Message):
        """The user asked to see the evidence of an advice item."""

        def __init__(self, item: Any) -> None:
            super().__init__()
            self.item = item
            """The advice item (with id, severity, title, evidence, change, step)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.border_title = "advice"
        self.items: list[Any] = []
        self._key: tuple[object, ...] | None = None

    def show(self, items: list[Any]) -> bool:
        """Replace the list when the advice changed; True when it did."""
        key = tuple((a.id, a.step, tuple(a.evidence)) for a in items)
        if key == self._key:
            return False
        self._key = key
        self.items = list(items)
        highlighted = self.highlighted
        self.clear_options()
        if not items:
            self.add_option(Option(Text("no problems seen", style="dim green"), disabled=True))
        for item in items:
            self.add_option(Option(_render(item)))
        self.border_subtitle = f"{len(items)} item{'s' if len(items) != 1 else ''} · enter: evidence"
        if items and highlighted is not None:
            self.highlighted = min(highlighted, len(items) - 1)
        return True

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if 0 <= event.option_index < len(self.items):
            self.post_message(self.EvidenceRequested(self.items[event.option_index]))


def _render(item: Any) -> Text:
    mark, style = SEVERITY_MARKS.get(item.severity, ("●", "bold"))
    text = Text()
    text.append(f"{mark} ", style=style)
    text.append(inert(item.title, newlines=False), style="bold")  # a title may quote the run's output
    if item.change:
        text.append("\n  → " + inert(change_text(item.change)).replace("\n", "\n    "), style="green")
    if item.no_fix:  # why `A` does not write this one (a key the user's tool does not have)
        text.append("\n  " + inert(item.no_fix, newlines=False), style="dim")
    return text
