"""Modal screens: confirm stop, quit (detach or stop), help, and an advice item's evidence."""

from __future__ import annotations

import shlex
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from loratui.text import inert
from loratui.tui.widgets.advice_panel import change_text


class Choice(ModalScreen[str]):
    """A question with a few answers, each bound to a key; escape cancels.

    An answer that stops the run never sits on a key that does something else on the main screen
    (`s` saves there): a habit must not stop training. tests/test_app.py checks every dialog."""

    BINDINGS = [Binding("escape", "dismiss('cancel')", "cancel")]

    def __init__(self, question: str, answers: list[tuple[str, str, str]], about_live_run: bool = False) -> None:
        super().__init__()
        self.question = question
        self.answers = answers  # (result, label, key)
        self.about_live_run = about_live_run
        """A question that only means something while the run goes (stop it?): closed when the run ends."""

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(inert(self.question), id="question", markup=False)  # it may quote a run's files
            with Horizontal(id="answers"):
                for result, label, key in self.answers:
                    yield Button(f"{label} ({key})", id=f"answer-{result}")

    def on_mount(self) -> None:
        for result, _, key in self.answers:
            if key != "esc":  # escape already cancels
                self._bindings.bind(key, f"dismiss('{result}')", show=False)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss((event.button.id or "answer-cancel").removeprefix("answer-"))


def quit_choice() -> Choice:
    """q: leave the viewer; the run keeps training unless the user says stop (x, as on the main screen)."""
    return Choice("Leave the viewer. The run keeps training unless you stop it.",
                  [("detach", "Detach", "d"), ("stop", "Stop the run", "x"), ("cancel", "Cancel", "esc")],
                  about_live_run=True)


def ended_quit_choice(state: str) -> Choice:
    """q, when the run ended while the quit question was open: nothing is left to detach from or stop."""
    return Choice(f"The run has ended ({state}) while you were deciding. Leave the viewer?",
                  [("quit", "Quit", "q"), ("cancel", "Stay", "esc")])


def stop_choice(by_signal: bool = False) -> Choice:
    """x: stop the run at the next step boundary; a watched command with no hooked Trainer gets SIGTERM
    (RunState.stop_by_signal), which ends it at once: no step boundary is waited for."""
    question = (STOP_BY_SIGNAL_QUESTION if by_signal else
                "Stop the run at the next step boundary? (a checkpoint is kept only if one was saved)")
    return Choice(question, [("stop", "Stop", "y"), ("cancel", "Cancel", "n")], about_live_run=True)


STOP_BY_SIGNAL_QUESTION = ("Stop the command now? loratui sends SIGTERM to its process group, which ends it at once, "
                           "not at a step boundary: only what it saved (or saves on SIGTERM itself) is kept.")


def restart_choice(path: Any, item: Any, env: dict[str, str] | None = None, finished: bool = False,
                   command: list[str] | None = None) -> Choice:
    """A: the changed recipe is written; restart with it? Every change the new run gets is listed: the
    recipe keys and the whole environment the new trainer will have from loratui; and, for a watched
    command, the exact command line `y` runs (from the run's run.json)."""
    what = "recipe" if str(path).endswith(".toml") else "config"  # a watched command's fixed YAML config
    keys = {k: v for k, v in item.change.items() if not k.startswith("env.")}
    lines = [f"Wrote {inert(str(path))}", "", f"{what.capitalize()} changes:"]
    lines += [f"  {line}" for line in inert(change_text(keys)).splitlines()] or ["  (none)"]
    lines += ["Environment for the new trainer:"]
    lines += [f"  {inert(f'{key}={value}', newlines=False)}" for key, value in sorted((env or {}).items())] or ["  (nothing added)"]
    if command:
        lines += ["Command that will run (from the run's run.json):",
                  f"  {inert(shlex.join(command), newlines=False)}"]
    if finished:
        lines += ["", f"This run has finished: start a NEW run from step 0 with the new {what}?"]
    else:
        lines += ["", f"Stop this run (if it still trains) and restart from its last checkpoint with the new {what}?"]
    return Choice("\n".join(lines), [("restart", "Restart", "y"), ("later", "Not now", "n")])


HELP = """\
loratui — keys (↑/↓ scroll this page; escape closes it)

  p  pause at the next step (state stays in VRAM)
  r  resume (paused or suspended)
  P  suspend: checkpoint, free the GPU, wait
  s  save a checkpoint now
  x  stop the run (asks)
  d  detach: leave it training (Ctrl-C, Ctrl-Q too)
  q  quit the viewer (asks: detach, stop or cancel)
  l  show/hide the trainer's output
  t  loss ↔ learning rate / grad norm
  a  focus the advice panel (enter: evidence)
  A  apply the highlighted advice: a new recipe (or
     YAML config) beside the old one, restart from the
     last checkpoint
  k  every rank's thread stacks (where a hung run
     waits), recorded in the log
  ?  this help

A command with no Trainer (a plain loop, `loratui run
-- python loop.py`) is paused by SIGSTOP (its memory
stays held) and stopped by SIGTERM, both at once.

Replay: space play/pause · + / - speed · → / ← step
        ] / [ next/previous event of note
        g / G start/end

Closing the viewer, a crash of it or a dropped SSH
link never stops training: `loratui attach` comes back."""


class TextScreen(ModalScreen[None]):
    """A read-only page (help, evidence); any of escape, q or enter closes it."""

    BINDINGS = [Binding("escape,q,enter,question_mark", "dismiss", "close")]

    def __init__(self, body: str | Group, markup: bool = False) -> None:
        super().__init__()
        self.body = body
        """Text, or a Rich group built of inert Text (the evidence page: its bullets' lines hang under their text)."""
        self.markup = markup

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog"):  # scrolls where the page is taller than the terminal
            body = self.body if self.markup or isinstance(self.body, Group) else inert(self.body)
            # A Rich group has no width of its own to size the dialog to: it takes the widest a page may be.
            yield Static(body, markup=self.markup, id="page", classes="group" if isinstance(body, Group) else "")

    def on_mount(self) -> None:
        self.query_one("#dialog").focus()  # so that the arrow keys, page up/down and home/end scroll it


def evidence_screen(item: Any) -> TextScreen:
    """An advice item: title, evidence lines, and the change to make. Each evidence line wraps under its own
    text, not under its bullet (at 80 columns a quoted error ran on at the page's edge, one bullet hard to tell
    from the next). Every string is inert: evidence quotes the run's own output."""
    head = [f"{item.severity.upper()}: {item.title}", f"(detected at step {item.step})", "", "Evidence:"]
    bullets = Table.grid()
    bullets.add_column(no_wrap=True)
    bullets.add_column(overflow="fold")  # a path longer than the line is cut, not pushed past the page
    for line in item.evidence:
        bullets.add_row("  • ", Text(inert(line)))
    tail = []
    if item.change:
        tail += ["", "Suggested change:"] + [f"  {line}" for line in change_text(item.change).splitlines()]
    if getattr(item, "no_fix", ""):
        tail += ["", item.no_fix]
    tail += ["", "escape: close"]
    return TextScreen(Group(Text(inert("\n".join(head))), bullets, Text(inert("\n".join(tail)))))
