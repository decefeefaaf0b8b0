"""Trial 7 at 80x24: the evidence page (a, enter) wrapped each long evidence line back at the page's left edge,
under its bullet, so one quoted error ran into the next; each line now wraps under its own text."""

from __future__ import annotations

from loratui.sources.runlog import ListSource
from loratui.tui.app import LoratuiApp
from tests import scenarios
from tests.test_app import Sent, _settle


def _page(app: LoratuiApp) -> list[str]:
    """The dialog's lines as drawn, its frame (the thick border and 2 columns of padding) taken off."""
    screen = [strip.text for strip in app.screen._compositor.render_strips()]
    return [line[line.index("█") + 3:line.rindex("█")].rstrip() for line in screen if line.count("█") >= 2]


async def test_evidence_lines_wrap_under_their_own_text_at_80_columns() -> None:
    app = LoratuiApp(ListSource(scenarios.failed_oom()), send=Sent())
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot, app, 30)
        await pilot.press("a")
        await pilot.press("enter")
        await pilot.pause(0.3)
        page = _page(app)
        start = page.index("Evidence:") + 1
        evidence = page[start:page.index("", start)]
        bullets = [line for line in evidence if line.startswith("  • ")]
        assert len(bullets) >= 4 and len(evidence) > len(bullets), page  # several items, long ones wrapped
        assert all(line.startswith(("  • ", "    ")) for line in evidence), page
        assert "Suggested change:" in page and "escape: close" not in page[:start], page
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert app.screen.__class__.__name__ != "TextScreen"
