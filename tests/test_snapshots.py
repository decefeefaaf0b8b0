"""How the main screen looks (SVG snapshots). Review diffs with `pytest --snapshot-report`; update with
`pytest tests/test_snapshots.py --snapshot-update` only for changes you meant."""

from __future__ import annotations

import pytest

from loratui import events
from loratui.recipe import Recipe
from loratui.sources.runlog import ListSource
from loratui.tui.app import LoratuiApp
from tests import scenarios


def _app(found: list[events.AnyEvent], controllable: bool = True) -> LoratuiApp:
    # A frozen throttle clock: panes draw when `redraw` says, never because wall time passed.
    return LoratuiApp(ListSource(found), Recipe(), send=(lambda command: None) if controllable else None,
                      clock=lambda: 0.0)


async def _folded(pilot) -> None:  # type: ignore[no-untyped-def]
    """Every event folded (the list source's worker has ended and its message is handled), every pane
    drawn: no sleeping."""
    app = pilot.app
    await app.workers.wait_for_complete()
    await pilot.pause()
    app.redraw()
    await pilot.pause()


SCENES = {
    "below_line": scenarios.run(60, peak_gib=21.0),
    "above_line": scenarios.run(60, peak_gib=33.5),
    "paused": scenarios.paused(40),
    "paused_sigstop": scenarios.paused_by_signal(40),
    "failed_oom": scenarios.failed_oom(30),
    "nan_loss": scenarios.nan_run(),
    "save_phase": scenarios.with_save(),
    "failed_at_start": scenarios.failed_at_start(),
}


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("scene", list(SCENES))
def test_main_screen(snap_compare, scene: str, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    """The status bar, VRAM pane with its warning line, utilisation, loss curve and advice for each scene:
    below_line: green bars under the yellow 30 GiB line, 'no problems seen';
    above_line: red bars over the line, the pane in its warning style, vram_near_limit advice;
    paused: PAUSED state and the footer offering resume instead of pause;
    paused_sigstop: a plain loop paused by SIGSTOP: a third status line says GPU memory stays held and
    multi-process peers may time out; the footer offers resume and stop only;
    failed_oom: FAILED, oom_fragmentation advice proposing expandable_segments;
    nan_loss: the loss curve with red NaN markers from step 35 and nan_loss advice;
    save_phase: the checkpoint save at step 30 marked in blue on the VRAM chart;
    failed_at_start: FAILED before the first step: the advice panel leads with the exception, the trainer's
    output opens by itself, wrapped.
    Everywhere: the legend in the loss pane's title, whole-step x ticks, every footer hint inside 80 columns."""
    assert snap_compare(_app(SCENES[scene]), terminal_size=size, run_before=_folded)
