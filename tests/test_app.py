"""The app driven by Pilot: on scripted sources, and on a real tiny run."""

from __future__ import annotations

from loratui import events
from loratui.sources.runlog import ListSource
from loratui.tui.app import LoratuiApp
from loratui.tui.messages import EventsArrived
from loratui.tui.widgets.advice_panel import AdvicePanel
from tests import scenarios


class Sent(list[str]):
    """A fake control channel that records commands."""

    def __call__(self, command: str) -> None:
        self.append(command)


async def _settle(pilot, app: LoratuiApp, step: int) -> None:  # type: ignore[no-untyped-def]
    for _ in range(100):
        await pilot.pause(0.05)
        if app.run_state.step >= step:
            break
    await pilot.pause(0.3)


def _footer_keys(app: LoratuiApp) -> set[str]:
    return {b.binding.key for b in app.active_bindings.values() if app.check_action(*_parse(b.binding.action)) is not False
            and b.binding.show}


def _parse(action: str) -> tuple[str, tuple[object, ...]]:
    name, _, rest = action.partition("(")
    return name, tuple(x.strip("'") for x in rest.rstrip(")").split(",") if x) if rest else ()


async def test_pause_is_sent_and_footer_follows_state() -> None:
    sent = Sent()
    source = ListSource(scenarios.run(20))
    app = LoratuiApp(source, send=sent)
    seen: list[object] = []
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await _settle(pilot, app, 20)
        assert app.run_state.state == events.TRAINING
        assert app.check_action("control", ("pause",)) and not app.check_action("control", ("resume",))
        await pilot.press("p")
        await pilot.pause(0.3)
        assert sent == ["pause"]
        source.extend([events.State(t=scenarios.T0 + 999, state=events.PAUSED, step=20)])
        app._poll_source()  # the worker ended with the list; start it again on the new events
        for _ in range(400):
            await pilot.pause(0.05)
            if app.run_state.state == events.PAUSED:
                break
        await pilot.pause(0.3)
        assert app.screen.has_class("-paused")
        assert app.check_action("control", ("resume",)) and not app.check_action("control", ("pause",))
        await pilot.press("r")
        await pilot.pause(0.3)
        assert sent == ["pause", "resume"]
    arrived = [m for m in seen if isinstance(m, EventsArrived)]
    assert arrived and isinstance(arrived[0].events[0], events.Header)


async def test_quit_asks_and_detach_leaves_the_run() -> None:
    sent = Sent()
    app = LoratuiApp(ListSource(scenarios.run(5)), send=sent)
    async with app.run_test(size=(100, 30)) as pilot:
        await _settle(pilot, app, 5)
        await pilot.press("q")
        await pilot.pause(0.2)
        assert app.screen.__class__.__name__ == "Choice"
        await pilot.press("d")
        await pilot.pause(0.2)
    assert app.return_value == "detach" and sent == []


async def test_stop_asks_for_confirmation() -> None:
    sent = Sent()
    app = LoratuiApp(ListSource(scenarios.run(5)), send=sent)
    async with app.run_test(size=(100, 30)) as pilot:
        await _settle(pilot, app, 5)
        await pilot.press("x")
        await pilot.pause(0.2)
        await pilot.press("n")
        await pilot.pause(0.2)
        assert sent == []
        await pilot.press("x")
        await pilot.pause(0.2)
        await pilot.press("y")
        await pilot.pause(0.4)
        assert sent == ["stop"]


async def test_a_viewer_without_control_offers_no_control_keys() -> None:
    app = LoratuiApp(ListSource(scenarios.run(5)), send=None)
    async with app.run_test(size=(100, 30)) as pilot:
        await _settle(pilot, app, 5)
        assert not app.check_action("control", ("pause",))
        await pilot.press("p")  # nothing happens, nothing raises
        await pilot.press("q")
        await pilot.pause(0.2)
    assert app.return_value == "quit"


async def test_advice_shows_and_enter_opens_evidence() -> None:
    app = LoratuiApp(ListSource(scenarios.failed_oom()), send=Sent())
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(pilot, app, 30)
        panel = app.query_one(AdvicePanel)
        assert panel.items, "an OOM run must produce advice"
        ids = [item.id for item in panel.items]
        assert "oom_fragmentation" in ids
        await pilot.press("a")
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert app.screen.__class__.__name__ == "TextScreen"
        await pilot.press("escape")


async def test_toggles_do_not_raise() -> None:
    app = LoratuiApp(ListSource(scenarios.nan_run()), send=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot, app, 50)
        assert app.run_state.nan_steps[0] == 35
        for key in ("t", "t", "l", "l", "question_mark", "escape"):
            await pilot.press(key)
            await pilot.pause(0.1)
        assert app.screen.has_class("narrow")


async def test_help_screen_shows_every_key() -> None:
    app = LoratuiApp(ListSource(scenarios.run(3)), send=Sent())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause(0.3)
        from textual.widgets import Static

        from loratui.tui.screens import HELP

        widget = app.screen.query_one("#page", Static)
        widest = max(len(line) for line in HELP.splitlines())
        assert widget.size.width >= widest and widget.size.height > 10  # sized to its text, not an empty box
        page = str(widget.render())
        for fragment in ("pause at the next step", "suspend", "apply the highlighted advice", "next/previous event"):
            assert fragment in page, fragment


def test_rank_imbalance_is_flagged() -> None:
    from loratui.tui.widgets.vram import rank_imbalance

    gib = 1 << 30
    assert not rank_imbalance({0: 20 * gib})
    assert not rank_imbalance({0: 20 * gib, 1: 21 * gib})
    assert rank_imbalance({0: 30 * gib, 1: 12 * gib})


async def test_vram_pane_without_gpu_keeps_torch_and_estimate_apart() -> None:
    """A CPU run (no NVML): the torch and estimate lines never run together, at 80x24 or larger."""
    from loratui.tui.widgets.vram import VramPane

    cpu_run = [events.GpuInfo(t=e.t, available=False, reason="NVML cannot start") if isinstance(e, events.GpuInfo)
               else e for e in scenarios.run(5) if not isinstance(e, events.Sample)]
    for size in ((80, 24), (160, 48)):
        app = LoratuiApp(ListSource(cpu_run))
        async with app.run_test(size=size) as pilot:
            await _settle(pilot, app, 5)
            text = app.query_one(VramPane).render().plain
        assert "device memory: N/A (NVML cannot start)" in text and "GiB · estimate 22.0 GiB" in text, (size, text)


async def test_a_small_estimate_is_said_in_mib_not_as_zero_gib() -> None:
    """The trial's tiny CPU run: its 36 MiB estimate read "estimate 0.0 GiB device · 0.0 reserved"."""
    from loratui.tui.widgets.vram import VramPane

    small = 36 / 1024
    cpu_run = [events.Estimate(t=e.t, peak_device_gib=small, peak_reserved_gib=small)
               if isinstance(e, events.Estimate) else
               events.GpuInfo(t=e.t, available=False, reason="NVML cannot start") if isinstance(e, events.GpuInfo)
               else e for e in scenarios.run(5) if not isinstance(e, events.Sample)]
    assert any(isinstance(e, events.Estimate) for e in cpu_run)
    app = LoratuiApp(ListSource(cpu_run))
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot, app, 5)
        text = app.query_one(VramPane).render().plain
    assert "estimate 36 MiB device · 36 MiB reserved" in text and "0.0" not in text, text


# -- what reaches the screen (issues 14, 15, 16) ------------------------------------------------------------

ESC = "\x1b"


def _screen(app: LoratuiApp) -> list[str]:
    """The whole terminal as plain text lines, as the user sees it (dialogs and toasts included)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


class FakeClock:
    """The panes' throttle clock, moved by the test instead of by sleeping."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def _folded(pilot, app: LoratuiApp) -> None:  # type: ignore[no-untyped-def]
    """Every event of a list source folded and every pane drawn: no waiting on the wall clock."""
    await app.workers.wait_for_complete()
    await pilot.pause()
    app.redraw()
    await pilot.pause()


def _hostile_run() -> list[events.AnyEvent]:
    found = [e for e in scenarios.run(5) if not isinstance(e, events.GpuInfo)]
    header = found[0]
    assert isinstance(header, events.Header)
    found[0] = events.Header(t=header.t, schema=1, run_id="r", recipe_hash="h", name="exp [x] a[/b]")
    found.insert(2, events.GpuInfo(t=scenarios.T0, available=True, names=["Evil [/] GPU"], totals=[1 << 35],
                                   indices=[0]))
    found = [events.Sample(t=e.t, gpu=e.gpu, used_max=e.used_max, used_last=e.used_last, used_min=e.used_min,
                           total=1 << 35, util=e.util, n=e.n) if isinstance(e, events.Sample) else e for e in found]
    found.append(events.Output(t=found[-1].t, stream="stdout", lines=[
        f"{ESC}[2J{ESC}[Hcleared?", f"{ESC}]0;owned title\x07after title",
        f"{ESC}]8;;https://evil.example/{ESC}\\click me{ESC}]8;;{ESC}\\", f"{ESC}[31mred{ESC}[0m then plain",
        "markup [/] and [bold]not bold[/bold]", "back\bspace and over\rwrite"]))
    return found


async def test_hostile_text_leaves_the_screen_intact() -> None:
    """Escapes in trainer output and markup-like names: nothing acts, nothing crashes, nothing is lost."""
    from loratui.tui.widgets.log_pane import LogPane
    from loratui.tui.widgets.vram import VramPane

    app = LoratuiApp(ListSource(_hostile_run()), clock=FakeClock())
    async with app.run_test(size=(160, 48)) as pilot:
        await _folded(pilot, app)
        await pilot.press("l")
        await pilot.pause()
        screen = _screen(app)
        log = app.query_one(LogPane)
        logged = [strip.text for strip in log.lines]
        vram_title = app.query_one(VramPane).border_title
        styles = [seg.style for strip in log.lines for seg in strip if seg.style is not None]
    text = "\n".join(screen)
    assert not any(ch in text for ch in (ESC, "\x07", "\x9b", "\b", "\r")), text
    assert screen[0].startswith(" exp [x] a[/b] ")  # the status bar is still the first line
    assert "VRAM Evil [/] GPU" in text and vram_title == r"VRAM Evil \[/] GPU"  # a Text title, escaped as markup
    for shown in ("cleared?", "after title", "click me", "red then plain", "markup [/] and [bold]not bold[/bold]",
                  "back␈space and over␍write"):
        assert any(shown in line for line in logged), (shown, logged)
    assert not any("owned title" in line or "evil.example" in line for line in logged)
    assert not any(style.color is not None for style in styles)  # no colour from the output: none leaks on


async def test_notifications_never_read_text_as_markup() -> None:
    """A refused command naming a folder `a[/b]` (which crashed the app) or `[x]` (which was lost)."""

    def refuse(command: str) -> None:
        raise RuntimeError(f"no run at /runs/a[/b]/[x]{ESC}[2J")

    app = LoratuiApp(ListSource(scenarios.run(3)), send=refuse, clock=FakeClock())
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await _folded(pilot, app)
        await pilot.press("p")
        await app.workers.wait_for_complete()
        await pilot.pause()
        app.say("wrote /home/u/exp [x]/recipe.fixed.toml")
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        text = "\n".join(_screen(app))
    assert messages == ["pause: no run at /runs/a[/b]/[x]", "wrote /home/u/exp [x]/recipe.fixed.toml"]
    assert "/runs/a[/b]/[x]" in text and "exp [x]/recipe" in text


async def test_a_refresh_during_teardown_does_not_raise() -> None:
    """The refresh timer stops on unmount, and a tick that races the teardown finds no pane and returns
    (it raised NoMatches now and then in the app tests)."""
    from loratui.tui.widgets.status import StatusBar

    app = LoratuiApp(ListSource(scenarios.run(3)), clock=FakeClock())
    async with app.run_test(size=(100, 30)) as pilot:
        await _folded(pilot, app)
        await app.query_one(StatusBar).remove()
        app._dirty = True
        app._refresh_panes()  # as a tick would, with a pane already gone
        app.on_resize(type("Resize", (), {"size": app.size})())
    assert app._refresh_timer is not None and app._refresh_timer._task is None  # stopped


async def test_a_run_that_fails_at_startup_says_why() -> None:
    """FAILED with 'no problems seen' and a cut line before: the advice panel leads with the reason (the
    advisor's exception item) and the trainer's output opens, wrapped, even at 200 columns and at 80x24."""
    from loratui.tui.widgets.log_pane import LogPane

    found = scenarios.failed_at_start()
    for size in ((200, 50), (80, 24)):
        app = LoratuiApp(ListSource(found), send=Sent(), clock=FakeClock())
        async with app.run_test(size=size) as pilot:
            await _folded(pilot, app)
            panel = app.query_one(AdvicePanel)
            log = app.query_one(LogPane)
            text = "\n".join(_screen(app))
            logged = " ".join(strip.text.strip() for strip in log.lines)
            widest = max(strip.cell_length for strip in log.lines)
            assert log.display and widest <= log.scrollable_content_region.width, size
        assert panel.items and panel.items[0].severity == "error", size
        assert "NoMatchingPeftModuleError" in panel.items[0].title and "no problems seen" not in text
        assert "Please check the target modules and try again." in logged, size  # wrapped, not cut


def test_the_shell_is_told_why_a_run_failed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from loratui.logic.runstate import RunState
    from loratui.rundir import RunDir
    from loratui.tui.app import farewell

    state = RunState().feed_all(scenarios.failed_at_start())
    said = farewell(RunDir(tmp_path / "20270115-093000-qwen7b"), state, "quit")
    assert said.splitlines()[1].strip().startswith("peft.utils.error.NoMatchingPeftModuleError: Target modules")
    assert "trainer.stderr.log" in said


async def test_stop_is_never_on_a_key_that_saves_elsewhere() -> None:
    """In the quit dialog `s` stopped the run while `s` saves on the main screen: a habit stopped training."""
    from loratui.tui.screens import quit_choice, stop_choice

    main_keys = {b.key: b.action for b in LoratuiApp.BINDINGS}  # type: ignore[union-attr]
    for dialog in (quit_choice(), stop_choice()):
        for result, _, key in dialog.answers:
            if result == "stop":
                assert main_keys.get(key, "stop") == "stop", (key, main_keys.get(key))
    sent = Sent()
    app = LoratuiApp(ListSource(scenarios.run(5)), send=sent, clock=FakeClock())
    async with app.run_test(size=(100, 30)) as pilot:
        await _folded(pilot, app)

        async def dialog_open(want: bool) -> None:  # a key pressed before the dialog mounts hits the main screen
            for _ in range(100):
                if (app.screen.__class__.__name__ == "Choice") == want:
                    return
                await pilot.pause(0.02)
            raise AssertionError(f"dialog open is not {want}")

        await pilot.press("q")
        await dialog_open(True)
        await pilot.press("s")  # the save habit: nothing happens
        await pilot.pause()
        assert app.screen.__class__.__name__ == "Choice" and sent == []
        await pilot.press("escape")
        await dialog_open(False)
        assert sent == []
        await pilot.press("q")
        await dialog_open(True)
        await pilot.press("x")
        for _ in range(100):  # the answer is sent from a worker the dismissed dialog's callback starts
            await app.workers.wait_for_complete()
            if sent:
                break
            await pilot.pause(0.02)
    assert sent == ["stop"] and app.return_value == "stop"


def _actions() -> object:
    from loratui.tui.app import RunActions

    return RunActions(send=Sent(), write_fix=lambda *a: (None, {}), restart=lambda *a: None)  # type: ignore[arg-type]


async def test_every_footer_hint_fits_80_columns() -> None:
    """At 80x24 `? help`, `t` and `A` fell off the footer's right edge."""
    from textual.widgets._footer import FooterKey

    from loratui.recipe import Recipe

    expected = {"question_mark", "t", "a", "x", "d", "q", "l", "s", "P"}
    for found, keys_too in ((scenarios.run(60, peak_gib=33.5), {"p", "A"}), (scenarios.paused(40), {"r"})):
        app = LoratuiApp(ListSource(found), Recipe(), actions=_actions(), clock=FakeClock())  # type: ignore[arg-type]
        async with app.run_test(size=(80, 24)) as pilot:
            await _folded(pilot, app)
            keys = list(app.query(FooterKey))
            assert keys and all(k.region.right <= 80 and k.region.width > 0 for k in keys)
            shown = {k.key for k in keys}
            footer = _screen(app)[-1]
        assert expected | keys_too <= shown, shown
        assert footer.rstrip().endswith("? help") and " t lr " in footer, footer


async def test_help_fits_80x24_and_160_columns_and_scrolls() -> None:
    """The help was cut at 80x24, and its `A` line at 160 columns."""
    from loratui.tui.screens import HELP

    for size in ((80, 24), (160, 48)):
        app = LoratuiApp(ListSource(scenarios.run(3)), send=Sent(), clock=FakeClock())
        async with app.run_test(size=size) as pilot:
            await _folded(pilot, app)
            await pilot.press("question_mark")
            await pilot.pause()
            seen = "\n".join(_screen(app))
            await pilot.press("end")
            await pilot.pause()
            seen += "\n" + "\n".join(_screen(app))
            dialog = app.screen.query_one("#dialog")
            assert dialog.region.right <= size[0] and dialog.region.bottom <= size[1]
        for line in HELP.splitlines():
            assert line.strip() in seen, (size, line)


async def test_log_at_80x24_takes_the_charts_place_whole() -> None:
    """`l` squashed the loss chart to one flat row and cut the log box's bottom border."""
    from loratui.tui.widgets.log_pane import LogPane
    from loratui.tui.widgets.loss_plot import LossPlot

    found = scenarios.run(20) + [events.Output(t=scenarios.T0 + 99, stream="stdout",
                                               lines=[f"line {i}" for i in range(30)])]
    app = LoratuiApp(ListSource(found), send=Sent(), clock=FakeClock())
    async with app.run_test(size=(80, 24)) as pilot:
        await _folded(pilot, app)
        await pilot.press("l")
        await pilot.pause()
        log, plot, advice = app.query_one(LogPane), app.query_one(LossPlot), app.query_one(AdvicePanel)
        text = _screen(app)
        assert log.display and log.region.height >= 5 and log.region.bottom <= advice.region.y
        assert not plot.display or plot.region.height >= 8
        assert text[log.region.bottom - 1].startswith("╰") and "line 29" in "\n".join(text)
        await pilot.press("l")
        await pilot.pause()
        assert plot.display and plot.region.height >= 8


def test_x_ticks_are_whole_steps() -> None:
    from loratui.tui.widgets.loss_plot import step_ticks

    assert step_ticks(1, 10, 6) == [2, 4, 6, 8, 10]
    assert step_ticks(1, 3, 6) == [1, 2, 3]
    assert step_ticks(0, 3000, 6) == [0, 1000, 2000, 3000]
    assert step_ticks(7, 7, 5) == [7]
    for first, last, most in ((1, 10, 6), (1, 97, 4), (12, 4000, 13)):
        ticks = step_ticks(first, last, most)
        assert 1 <= len(ticks) <= most and all(isinstance(t, int) and first <= t <= last for t in ticks)


async def test_loss_chart_legend_is_off_the_points_and_ticks_are_steps() -> None:
    from loratui.tui.widgets.loss_plot import LossPlot

    app = LoratuiApp(ListSource(scenarios.run(10)), clock=FakeClock())
    async with app.run_test(size=(80, 24)) as pilot:
        await _folded(pilot, app)
        plot = app.query_one(LossPlot)
        inside = _screen(app)[plot.region.y + 1:plot.region.bottom - 1]
        title = plot.border_title or ""
    assert "smoothed" in title and not any("smoothed" in line for line in inside)
    tick_row = inside[-1].strip("│ ")
    assert tick_row.split() and all(label.isdigit() for label in tick_row.split()), tick_row


async def test_a_new_state_draws_every_pane_at_once() -> None:
    """The chart lagged the header by a few steps: a pause (any state change) shows a consistent picture."""
    from loratui.tui.widgets.loss_plot import LossPlot

    clock = FakeClock()
    source = ListSource(scenarios.run(12)[:-30])
    app = LoratuiApp(source, send=Sent(), clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await _folded(pilot, app)
        drawn = app.query_one(LossPlot).last_step
        source.extend(scenarios.paused(12)[len(scenarios.run(12)) - 30:])
        app._poll_source()
        await app.workers.wait_for_complete()
        await pilot.pause()
        app._refresh_panes()  # the throttle's clock has not moved: only the state change forces it
        await pilot.pause()
        assert app.run_state.state == events.PAUSED and app.run_state.step == 12
        assert drawn is not None and drawn < 12 and app.query_one(LossPlot).last_step == 12


async def test_a_long_note_never_wraps_over_the_step_line() -> None:
    from loratui.tui.widgets.status import StatusBar

    class Noted(LoratuiApp):
        def status_extra(self) -> str:
            return "REPLAY ▶ x1 0s/3m02s  " + "note " * 30

    app = Noted(ListSource(scenarios.run(5)), clock=FakeClock())
    async with app.run_test(size=(80, 24)) as pilot:
        await _folded(pilot, app)
        bar = app.query_one(StatusBar)
        lines = _screen(app)[bar.region.y:bar.region.bottom]
    assert lines[1].startswith(" step 5/200") and lines[0].rstrip().endswith("…"), lines


async def test_no_gpu_reason_is_said_once() -> None:
    from loratui.tui.widgets.gpu_util import UtilPane

    cpu_run = [events.GpuInfo(t=e.t, available=False, reason="NVML cannot start: library not found")
               if isinstance(e, events.GpuInfo) else e for e in scenarios.run(5) if not isinstance(e, events.Sample)]
    app = LoratuiApp(ListSource(cpu_run), clock=FakeClock())
    async with app.run_test(size=(80, 24)) as pilot:
        await _folded(pilot, app)
        text = "\n".join(_screen(app))
        util = app.query_one(UtilPane).render().plain
    assert text.count("library not found") == 1 and "N/A" in util


async def test_evidence_wraps_long_lines_at_80x24() -> None:
    """A traceback's last line quoted as evidence was cut at the dialog's edge."""
    app = LoratuiApp(ListSource(scenarios.failed_at_start()), send=Sent(), clock=FakeClock())
    async with app.run_test(size=(80, 24)) as pilot:
        await _folded(pilot, app)
        await pilot.press("a", "enter")
        await pilot.pause()
        dialog = app.screen.query_one("#dialog")
        inside = [line[dialog.region.x:dialog.region.right] for line in _screen(app)]
    shown = " ".join(" ".join(line.strip("█▀▄ ").split()) for line in inside)
    assert "Please check the target modules and try again." in shown, shown


async def test_apply_key_appears_when_advice_with_a_change_arrives() -> None:
    """`A` is offered only while some advice has a change: the footer must follow the advice, not only
    the run's state (which does not change when the advice does)."""
    from textual.widgets._footer import FooterKey

    from loratui.logic.advisor import Advisor
    from loratui.recipe import Recipe

    found = scenarios.run(60, peak_gib=33.5)
    advisor = Advisor(Recipe())
    first = next(i for i, e in enumerate(found) if any(item.change for item in advisor.feed_all([e]).items()))
    assert any(isinstance(e, events.State) and e.state == events.TRAINING for e in found[:first])
    source = ListSource(found[:first])
    app = LoratuiApp(source, Recipe(), actions=_actions(), clock=FakeClock())  # type: ignore[arg-type]
    async with app.run_test(size=(120, 40)) as pilot:
        await _folded(pilot, app)
        assert "A" not in {k.key for k in app.query(FooterKey)}
        source.extend(found[first:])
        app._poll_source()
        await _folded(pilot, app)
        assert app.run_state.state == events.TRAINING
        assert "A" in {k.key for k in app.query(FooterKey)}
