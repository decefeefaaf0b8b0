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
        for _ in range(40):
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

        widget = app.screen.query_one("#page", Static)
        assert widget.size.width > 60 and widget.size.height > 10  # sized to its text, not an empty box
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
