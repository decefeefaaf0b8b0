"""The Textual app: the panes of one run, fed by an event source, with keys that control the run.

The app only reads events (from a source handed to it) and sends control commands: closing it never
stops training. Live, attach and replay post the same `EventsArrived` messages, so the panes and the
advice are the same in all three.
"""

from __future__ import annotations

import shlex
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.timer import Timer
from textual.widgets import Footer

from loratui import events, userstate
from loratui.errors import ApplyError
from loratui.logic import command_keys
from loratui.logic.advisor import Advisor
from loratui.logic.runstate import RunState
from loratui.logic.story import Story
from loratui.recipe import Recipe
from loratui.rundir import RunDir
from loratui.sources.runlog import Batch, EventSource, LiveSource
from loratui.text import inert
from loratui.tui import failure, headless
from loratui.tui.messages import EventsArrived, StateReplaced
from loratui.tui.screens import (HELP, TextScreen, ended_quit_choice, evidence_screen, quit_choice, restart_choice,
                                 stop_choice)
from loratui.tui.widgets.advice_panel import AdvicePanel
from loratui.tui.widgets.gpu_util import UtilPane
from loratui.tui.widgets.log_pane import LogPane
from loratui.tui.widgets.loss_plot import LossPlot
from loratui.tui.widgets.status import StatusBar
from loratui.tui.widgets.vram import VramPane


@dataclass(frozen=True)
class RunActions:
    """What the app may do to the run it watches, handed in by the command that opens it (the viewer
    never imports the owner side)."""

    send: Callable[[str], None]
    """Deliver a control command (pause, resume, ...); raises on refusal."""
    write_fix: Callable[[str, dict[str, Any]], tuple[Path, dict[str, str]]]
    """Write an advice's change as a new recipe: (its path, the environment it asks for)."""
    restart: Callable[[Path, dict[str, str], Callable[[str], None]], RunDir]
    """Stop the run and start the fixed recipe from its last checkpoint: the new run."""
    stacks: Callable[[], str] | None = None
    """Record every trainer rank's thread stacks in the log; the text to show (`k`)."""
    command_for: Callable[[Path], list[str]] | None = None
    """The command line a restart with this fixed config would run ([] for a recipe run): shown first."""


CONTROL_ACTIONS = {
    "pause": {events.TRAINING},
    "resume": {events.PAUSED, events.SUSPENDED},
    "suspend": {events.TRAINING, events.PAUSED},
    "save": {events.TRAINING, events.PAUSED},
    "stop": {events.STARTING, events.LOADING, events.TRAINING, events.PAUSED, events.SUSPENDED},
}
NARROW_WIDTH = 110
PANE_INTERVALS = {"vram": 1.0, "util": 1.0, "loss": 1.0, "log": 0.5, "advice": 1.0}
"""Seconds between redraws of each pane (the status bar follows every refresh tick); a change of the
run's state (paused, failed, ...) redraws every pane at once, so a still picture is a consistent one."""


ADVICE_KEYS = Binding.Group("advice", compact=True)
"""`a` (focus the advice) and `A` (apply it) share one footer label: "aA advice"."""


class LoratuiApp(App[str]):
    """One run's panes. `source` delivers events; `send` (if given) delivers control commands."""

    CSS_PATH = Path(__file__).with_name("app.tcss")
    TITLE = "loratui"
    AUTO_FOCUS = "#advice"  # the log pane would otherwise take focus and swallow the arrow keys
    ENABLE_COMMAND_PALETTE = False  # its footer hint took 12 of 80 columns; every action has a key
    BINDINGS = [
        # Short labels, a compact footer, `a`/`A` under one label: every hint fits 80 columns.
        Binding("p", "control('pause')", "pause"),
        Binding("r", "control('resume')", "resume"),
        Binding("P", "control('suspend')", "suspend"),
        Binding("s", "control('save')", "save"),
        Binding("x", "stop", "stop"),
        Binding("d", "detach", "detach", key_display="d/^c"),
        # Ctrl-C and Ctrl-Q leave the viewer as `d` does, over any dialog: a reflex must never stop the training
        # (Textual's own Ctrl-C only hinted "press ctrl+q to quit", and ctrl+q left with nothing said on screen).
        Binding("ctrl+c,ctrl+q", "interrupt", show=False, priority=True),
        Binding("q", "quit_viewer", "quit"),
        Binding("l", "toggle_log", "log"),
        Binding("t", "toggle_plot", "lr"),
        Binding("a", "focus_advice", "advice", group=ADVICE_KEYS),
        Binding("A", "apply_advice", "apply", group=ADVICE_KEYS),
        # Where `A` can write nothing (a plain script's advice), the same key says why instead of nothing.
        Binding("A", "why_not_apply", show=False),
        Binding("k", "stacks", "stacks", show=False),
        Binding("question_mark", "help", "help"),
    ]

    def __init__(self, source: EventSource, recipe: Recipe | None = None, send: Callable[[str], None] | None = None,
                 poll_s: float = 0.25, refresh_s: float = 0.25, actions: RunActions | None = None,
                 clock: Callable[[], float] = time.monotonic, away: AwayTracking | None = None) -> None:
        super().__init__()
        self.source = source
        self.actions = actions
        """What the app may do to the run (None for a replay: view only)."""
        self.send = send if send is not None else (actions.send if actions else None)
        """Control commands only (a test may give just this)."""
        self.recipe = recipe
        self.poll_s = poll_s
        self.refresh_s = refresh_s
        self.clock = clock
        """The panes' redraw throttle reads this clock (a test hands in a fake one instead of sleeping)."""
        self.run_state = RunState()
        self.advisor: Advisor | None = Advisor(recipe)
        self.note = ""
        self.outcome = "detach"
        self._dirty = True
        self._last_state = ""
        self._drawn: dict[str, float] = {}
        self._stop_polling = threading.Event()
        self._refresh_timer: Timer | None = None
        self._log_opened_on_failure = False
        self._opened = time.time()
        self.away = away
        """Attach only: the "while you were away" card's memory of when this user last looked."""
        self._story = Story(failure.in_a_line) if away is not None else None
        self._last_event_t = 0.0

    # -- layout -----------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        warn = self.recipe.monitor.warn_gb if self.recipe else 30.0
        yield StatusBar(id="status")
        with Horizontal(id="body"):
            with Vertical(id="main"):
                yield VramPane(warn_gib=warn, id="vram")
                yield UtilPane(id="util")
                yield LossPlot(id="loss")
                yield LogPane(id="log")
            yield AdvicePanel(id="advice")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one(LogPane).display = False
        self._apply_width(self.size.width)
        self._refresh_timer = self.set_interval(self.refresh_s, self._refresh_panes)
        self.start_source()

    def on_resize(self, event: Any) -> None:
        try:
            self._apply_width(event.size.width)
        except NoMatches:  # not composed yet, or closing
            pass

    def _apply_width(self, width: int) -> None:
        self.main_screen.set_class(width < NARROW_WIDTH, "narrow")

    @property
    def main_screen(self) -> Any:
        """The screen of the panes (`self.screen` is a dialog while one is open)."""
        return self.query_one(StatusBar).screen

    # -- data in ----------------------------------------------------------------------------------

    def start_source(self) -> None:
        """Begin reading the source (replay overrides this with its own clock)."""
        self._poll_source()

    @work(thread=True, exclusive=True, group="source")
    def _poll_source(self) -> None:
        """Poll the source off the event loop and post what it finds."""
        told_caught_up = False
        opening = getattr(self.source, "opening", None)
        if self.away is not None and not self.away.shown and opening is not None:  # an attach: the index's fold
            opened = opening(self.recipe, self.away.since)
            if opened is not None:
                self.post_message(StateReplaced(opened.state, opened.advisor, opened.recent))
        while not self._stop_polling.is_set():
            batch: Batch = self.source.poll()
            if batch.events or batch.note != self.note:
                self.post_message(EventsArrived(batch.events, batch.note))
            elif not told_caught_up:  # said once: the away card waits for the whole history, then shows
                told_caught_up = True
                self.post_message(EventsArrived([], batch.note, caught_up=True))
            if batch.ended:
                return
            self._stop_polling.wait(self.poll_s)

    @on(EventsArrived)
    def _fold(self, message: EventsArrived) -> None:
        for event in message.events:
            self.run_state.feed(event)
            if self.advisor is not None:
                self.advisor.feed(event)
            if isinstance(event, events.Notice) and event.key == "alert" and self.send is not None \
                    and event.t >= self._opened:  # live alerts only: not those of the history on attach
                self.bell()
                self.say(event.message[:300], severity="warning", timeout=15)
        if self._story is not None and (message.events or message.caught_up):
            self._story.feed_all(message.events)
            if message.events:
                self._last_event_t = max(self._last_event_t, message.events[-1].t)
            self._show_away_card(message.caught_up)
        self.note = message.note
        self._dirty = True

    def _show_away_card(self, at_end: bool = False) -> None:
        """Once, on attach: what happened since this user last looked (from the history just read). `at_end`:
        the reader found nothing more to read (a paused or suspended run with no GPU samples writes nothing:
        waiting for an event newer than the attach, the card never came)."""
        assert self.away is not None and self._story is not None
        caught_up = at_end or self.run_state.end is not None or self._last_event_t >= self._opened - 2.0
        if self.away.shown or not caught_up:  # a long history arrives in several batches: wait for its end
            return
        self.away.shown = True
        if self.away.since is None:  # never shown here before: the panes hold the whole history anyway
            return
        seen = [m for m in self._story.since(self.away.since) if m.t < self._opened]
        if seen:
            self.push_screen(TextScreen(away_card(seen, self.away.since, self.run_state.run_id)))

    @on(StateReplaced)
    def _replace(self, message: StateReplaced) -> None:
        self.run_state, self.advisor = message.state, message.advisor
        if message.recent is not None and self._story is not None:  # an attach opened from the index
            self._story.feed_all(message.recent)
            self._last_event_t = max(self._last_event_t, self.run_state.last_t or 0.0)
        self.query_one(LogPane).reset()
        self.redraw()  # a seek shows its result at once

    def redraw(self) -> None:
        """Draw every pane now, whatever the throttle says (a seek; a test's still picture)."""
        self._dirty = True
        self._drawn.clear()
        self._refresh_panes()

    def _refresh_panes(self) -> None:
        """Push the state down to the panes, each at most as often as its `PANE_INTERVALS` allows.

        A scrolling chart repaints every cell it covers, so redraw rate is what a slow SSH link pays
        for: the status line moves at 4 Hz, the charts at 1 Hz.
        """
        try:
            self._refresh_now()
        except NoMatches:  # the app is closing: its panes are being removed under the timer
            return

    def _refresh_now(self) -> None:
        if not self._dirty:
            if self.wall_now() is not None:  # live: the elapsed time moves even without events
                self.query_one(StatusBar).show(self.run_state, self.status_extra(), self.wall_now())
            return
        now = self.clock()
        state = self.run_state
        self.query_one(StatusBar).show(state, self.status_extra(), self.wall_now())
        changed = state.state != self._last_state
        if changed:
            self._drawn.clear()  # a new state is shown whole: no pane lags the header
        pending = False
        for pane_id, interval in PANE_INTERVALS.items():
            if now - self._drawn.get(pane_id, -1e9) < interval:
                pending = True
                continue
            self._drawn[pane_id] = now
            self._draw_pane(pane_id, state)
        self._dirty = pending
        if changed:
            self._last_state = state.state
            self.main_screen.set_class(state.state == events.PAUSED, "-paused")
            self.refresh_bindings()
            self._open_log_on_failure(state)
            self._close_stale_dialogs(state)

    def _close_stale_dialogs(self, state: RunState) -> None:
        """The run ended under a question about the live run (stop it? detach or stop?): close it, and ask a
        quitting user only whether to leave. The footer then offers what fits the ended run."""
        dialog = self.screen
        if state.state not in events.FINAL_STATES or not getattr(dialog, "about_live_run", False):
            return
        quitting = any(result == "detach" for result, _, _ in dialog.answers)
        dialog.dismiss("ended")  # its callback ignores this answer
        self.refresh_bindings()
        if quitting:
            self.push_screen(ended_quit_choice(state.state),
                             lambda answer: self.exit("quit") if answer == "quit" else self.refresh_bindings())

    def _open_log_on_failure(self, state: RunState) -> None:
        """A run that failed before its first loss has an empty chart: show its output instead, once."""
        if state.state == events.FAILED and not state.loss and not self._log_opened_on_failure:
            self._log_opened_on_failure = True
            if not self.query_one(LogPane).display:
                self.action_toggle_log()

    def _draw_pane(self, pane_id: str, state: RunState) -> None:
        if pane_id == "vram":
            self.query_one(VramPane).show(state)
        elif pane_id == "util":
            self.query_one(UtilPane).show(state)
        elif pane_id == "loss":
            self.query_one(LossPlot).show(state)
        elif pane_id == "log":
            log = self.query_one(LogPane)
            if log.display:
                log.show(state, state.output_lines)
        elif self.advisor is not None:
            if self.query_one(AdvicePanel).show(self.advisor.items()):
                self.refresh_bindings()  # `A` is offered only while some advice has a change

    def status_extra(self) -> str:
        """Text after the state in the status bar (replay shows its position here)."""
        return self.note

    def say(self, message: str, **kwargs: Any) -> None:
        """A notification whose text is never read as markup (paths, errors: `a[/b]` must show as is)."""
        self.notify(inert(message), markup=False, **kwargs)

    def wall_now(self) -> float | None:
        """The wall clock for a live view's elapsed time; None where time comes from the log only."""
        return time.time() if isinstance(self.source, LiveSource) else None

    # -- keys -------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Offer a control action only when it applies to the run's current state."""
        # A watched command obeys only what its trainer said it can (run_state.controls): no suspend
        # without Trainer.train, no save or suspend for a process paused by SIGSTOP.
        controls = self.run_state.controls
        if action == "control":
            command = str(parameters[0])
            return (self.send is not None and self.run_state.state in CONTROL_ACTIONS[command]
                    and (controls is None or command in controls))
        if action in ("stop", "detach"):
            return self.send is not None and self.run_state.state in CONTROL_ACTIONS["stop"]
        if action == "apply_advice":
            # `A` rewrites a recipe, or a watched command's LLaMA-Factory/axolotl YAML config: only advice with
            # a fix it can write (a plain script has neither, so nothing there).
            return self.actions is not None and self.advisor is not None and any(
                item.fix for item in self.advisor.items())
        if action == "why_not_apply":  # also a view that cannot write (replay): it names `loratui apply`
            return self.advisor is not None and any(item.no_fix or (self.actions is None and item.fix)
                                                    for item in self.advisor.items())
        return True

    def action_control(self, command: str) -> None:
        self._send(command)

    @work(thread=True, group="control")
    def _send(self, command: str) -> None:
        """Deliver a command off the event loop; the log will show its effect."""
        try:
            self.send(command)
        except Exception as exc:  # ControlError or a socket error: tell the user, keep the viewer
            self.call_from_thread(self.say, f"{command}: {exc}", severity="error")
        else:
            self.call_from_thread(self.say, f"{command}: sent", timeout=2)

    def action_stop(self) -> None:
        def decided(answer: str | None) -> None:
            self.refresh_bindings()  # the state may have moved while the dialog was up
            if answer == "stop":
                self._send("stop")

        self.push_screen(stop_choice(self.run_state.stop_by_signal), decided)

    def action_detach(self) -> None:
        self.outcome = "detach"
        self.exit("detach")

    def action_interrupt(self) -> None:
        """Ctrl-C: a live run is detached from, and keeps training (the shell is told how to come back); a
        replay or an ended run is simply left."""
        live = self.send is not None and self.run_state.state not in events.FINAL_STATES
        self.exit("detach" if live else "quit")

    def action_quit_viewer(self) -> None:
        if self.send is None or self.run_state.state in events.FINAL_STATES:
            self.exit("quit")
            return

        def decided(answer: str | None) -> None:
            self.refresh_bindings()  # the state may have moved while the dialog was up
            if answer == "detach":
                self.exit("detach")
            elif answer == "stop":
                # Delivered before the viewer exits: a worker thread would be cancelled by the exit and
                # the stop lost (the socket answers within its 2 s deadline).
                try:
                    self.send("stop")  # type: ignore[misc]
                except Exception as exc:  # refused or unreachable: say so and keep the viewer
                    self.say(f"stop: {exc}", severity="error")
                    return
                self.exit("stop")

        self.push_screen(quit_choice(), decided)

    def action_toggle_log(self) -> None:
        log = self.query_one(LogPane)
        log.display = not log.display
        self.main_screen.set_class(log.display, "-log")  # on a small screen the log takes the chart's place
        if log.display:
            log.show(self.run_state, self.run_state.output_lines)

    def action_focus_advice(self) -> None:
        panel = self.query_one(AdvicePanel)
        panel.focus()
        if panel.items and panel.highlighted is None:
            panel.highlighted = 0

    def action_toggle_plot(self) -> None:
        self.query_one(LossPlot).toggle(self.run_state)

    def action_help(self) -> None:
        self.push_screen(TextScreen(HELP))

    def action_apply_advice(self) -> None:
        """Write the highlighted advice's change into a new recipe and offer to restart with it."""
        panel = self.query_one(AdvicePanel)
        items = [item for item in panel.items if item.fix]
        if self.actions is None or not items:
            return
        index = panel.highlighted if panel.highlighted is not None else 0
        chosen = panel.items[index] if index < len(panel.items) else None
        if chosen is not None and chosen.no_fix:  # the highlighted advice has a change `A` cannot write
            self.say(chosen.no_fix, severity="warning", timeout=8)
            return
        item = chosen if chosen is not None and chosen.fix else items[0]
        try:
            path, env = self.actions.write_fix(item.id, item.fix)
        except ApplyError as exc:
            self.say(str(exc), severity="error")
            return
        finished = self.run_state.state == events.FINISHED
        try:  # what `y` would run, from run.json itself (a log's header may say anything)
            command = self.actions.command_for(path) if self.actions.command_for is not None else []
        except (ApplyError, OSError, ValueError) as exc:
            self.say(f"cannot tell what a restart would run: {exc}", severity="error")
            return
        self.push_screen(restart_choice(path, item, env, finished, command),
                         lambda answer: self._restart(answer, path, env, command))

    def action_why_not_apply(self) -> None:
        """`A` where no advice has a change it can write: say why (the highlighted advice's reason first)."""
        panel = self.query_one(AdvicePanel)
        index = panel.highlighted if panel.highlighted is not None else 0
        chosen = panel.items[index] if index < len(panel.items) else None
        fixable = [item for item in panel.items if item.fix]
        if self.actions is None and fixable and not (chosen is not None and chosen.no_fix):
            item = chosen if chosen is not None and chosen.fix else fixable[0]
            self.say(f"this view only reads the run: `loratui apply {self.run_state.run_id or 'RUN'} {item.id}` "
                     "writes the change into a copy of its recipe", timeout=8)
            return
        reason = (chosen.no_fix if chosen is not None and chosen.no_fix
                  else next((item.no_fix for item in panel.items if item.no_fix), ""))
        if reason:
            self.say(inert(reason, newlines=False), severity="warning", timeout=8)

    def _restart(self, answer: str | None, path: Path, env: dict[str, str], command: list[str]) -> None:
        if answer == "restart":
            self._restart_worker(path, env)
        elif command or self.run_state.command:  # a fixed config: the same command line with the copy's path
            again = shlex.join(command or command_keys.with_config(self.run_state.command, str(path)))
            self.say(f"wrote {inert(str(path))}; start it with `loratui run -- {inert(again, newlines=False)}`",
                     timeout=8)
        else:
            self.say(f"wrote {path}; start it with `loratui run {path}`", timeout=8)

    @work(thread=True, group="control")
    def _restart_worker(self, path: Path, env: dict[str, str]) -> None:
        assert self.actions is not None
        self.call_from_thread(self.say, "stopping the run, then restarting from its last checkpoint…")
        try:
            new_run = self.actions.restart(path, env, self.actions.send)
        except Exception as exc:  # a bad path or a refused start: say it, keep the viewer
            self.call_from_thread(self.say, f"restart failed: {exc}", severity="error")
            return
        self.call_from_thread(self.exit, f"switch:{new_run.path}")

    def action_stacks(self) -> None:
        if self.actions is None or self.actions.stacks is None:
            return
        if self.run_state.state in events.FINAL_STATES:  # no one left to ask: say so, not "asking…"
            self.say(f"the run has {self.run_state.state}: no process is left to show stacks of")
            return
        self.say("asking every rank for its stacks…")
        self._stacks_worker()

    @work(thread=True, group="control")
    def _stacks_worker(self) -> None:
        assert self.actions is not None and self.actions.stacks is not None
        try:
            text = self.actions.stacks()
        except Exception as exc:  # a run that ended meanwhile: say it, keep the viewer
            text = f"no stacks: {exc}"
        self.call_from_thread(self.push_screen, TextScreen(inert(text)))

    @on(AdvicePanel.EvidenceRequested)
    def _show_evidence(self, message: AdvicePanel.EvidenceRequested) -> None:
        self.push_screen(evidence_screen(message.item))

    def on_unmount(self) -> None:
        if self.away is not None and self._last_event_t:
            self.away.mark(self._last_event_t)
        self._stop_polling.set()
        if self._refresh_timer is not None:
            self._refresh_timer.stop()  # a tick during teardown would look for panes already gone


@dataclass
class AwayTracking:
    """When this user last saw a run, and how to remember the newest moment seen now."""

    since: float | None
    mark: Callable[[float], None]
    shown: bool = False


def away_card(moments: list[Any], since: float, run_id: str = "") -> str:
    """The "while you were away" card: each moment of note with its time and step, then the command that writes
    it down, with the run's id (a literal `RUN` was typed as a run name)."""
    lines = [f"While you were away (since {time.strftime('%a %H:%M', time.localtime(since))}):", ""]
    for m in moments:
        mark = {"error": "!! ", "warning": "!  "}.get(m.level, "   ")
        lines.append(f"{mark}{time.strftime('%H:%M', time.localtime(m.t))}  step {m.step:<6} {inert(m.text)[:160]}")
    report = f"loratui report {inert(run_id, newlines=False) or 'RUN'}"
    return "\n".join(lines + ["", f"escape or enter closes this card; {report} writes it down"])


def live_app(run: RunDir, actions: RunActions | None, attached: bool = False) -> LoratuiApp:
    """The app on a run directory: live tail plus the actions the command handed in. Every viewer
    remembers what it showed; an attach opens on what happened since."""
    recipe, _ = run.load_recipe()  # None: an old or hand-edited copy, shown without recipe-aware advice
    away = AwayTracking(userstate.last_viewed(run.path) if attached else None,
                        lambda t: userstate.mark_viewed(run.path, t), shown=not attached)
    return LoratuiApp(LiveSource(run, follow_suspended=True), recipe, actions=actions, away=away)


def run_app(run: RunDir, actions_for: Callable[[RunDir], RunActions], attached: bool = False) -> int:
    """Run the app on `run` (and on the run that replaces it after an applied advice)."""
    while True:
        app = live_app(run, actions_for(run), attached)
        attached = False
        result = app.run()
        if not (isinstance(result, str) and result.startswith("switch:")):
            break
        run = RunDir(Path(result.removeprefix("switch:")))
    state = app.run_state
    print(farewell(run, state, result))
    return 0 if state.state != events.FAILED else 1


def farewell(run: RunDir, state: RunState, result: object) -> str:
    """What the shell is told when the viewer closes: where the run stands and, if it failed, why."""
    if state.state not in events.FINAL_STATES and result != "stop":
        return headless.detached(run, state.state)
    if result == "stop":
        if state.stop_by_signal:
            return f"stopping {run.run_id}: SIGTERM sent to its command's process group."
        return f"stopping {run.run_id} at the next step boundary."
    said = f"run {run.run_id}: {state.state} at step {state.step}"
    why = failure.reason(state.end)
    if why:  # the app's screen is gone: the reason must outlive it
        said += f"\n  {why}\n  the trainer's output: {inert(str(run.stderr_log))}"
    return said


