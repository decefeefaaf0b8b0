"""The warning line is a fact of the run: recorded in the header, used by the pane and the advisor alike."""

from __future__ import annotations

import msgspec

from loratui import events
from loratui.logic.advisor import Advisor
from loratui.logic.advisor.advice import line_for, over_line
from loratui.logic.runstate import RunState
from loratui.sources.runlog import ListSource
from loratui.tui.app import LoratuiApp
from loratui.tui.widgets.vram import VramPane
from loratui.units import GIB
from tests import scenarios


def _with_line(found: list[events.AnyEvent], warn_gb: float) -> list[events.AnyEvent]:
    header = found[0]
    assert isinstance(header, events.Header)
    return [msgspec.structs.replace(header, warn_gb=warn_gb), *found[1:]]


def test_a_bare_log_replayed_without_its_recipe_keeps_its_line() -> None:
    found = _with_line(scenarios.run(40, peak_gib=21.0), warn_gb=16.0)  # under the 30 GiB default
    assert RunState().feed_all(found).warn_gb == 16.0
    ids = [a.id for a in Advisor(None).feed_all(found).items()]
    assert "vram_near_limit" in ids
    assert "vram_near_limit" not in [a.id for a in Advisor(None).feed_all(scenarios.run(40, peak_gib=21.0)).items()]


async def test_the_pane_draws_the_runs_line_and_agrees_with_the_advisor() -> None:
    found = _with_line(scenarios.run(40, peak_gib=21.0), warn_gb=16.0)
    app = LoratuiApp(ListSource(found))  # no recipe: a replay of a bare events.jsonl
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(30):
            await pilot.pause(0.1)
            if app.run_state.step >= 40:
                break
        await pilot.pause(1.2)
        pane = app.query_one(VramPane)
        assert pane.warn_gib == 16.0 and pane.has_class("-warning")


def test_one_rule_for_over_the_line() -> None:
    assert line_for(30 * GIB, 24 * GIB) == int(24 * GIB * 0.95)  # a card smaller than the line
    assert over_line(23 * GIB, 30 * GIB, 24 * GIB) and not over_line(20 * GIB, 30 * GIB, 24 * GIB)


def test_a_cpu_run_gets_no_memory_advice_even_over_a_tiny_line() -> None:
    found = _with_line(scenarios.run(5), warn_gb=1.0)
    cpu = [e for e in found if not isinstance(e, (events.GpuInfo, events.Sample))]
    cpu.insert(1, events.GpuInfo(t=cpu[0].t, available=False, reason="no NVML"))
    cpu.insert(2, events.Estimate(t=cpu[0].t, peak_device_gib=1.9, peak_reserved_gib=1.5))
    assert not [a.id for a in Advisor(None).feed_all(cpu).items() if a.id.startswith(("vram", "oom"))]
    gpu = [*found[:2], events.Estimate(t=found[0].t, peak_device_gib=1.9, peak_reserved_gib=1.5)]
    assert "vram_near_limit" in [a.id for a in Advisor(None).feed_all(gpu).items()]  # the same on a GPU: said
