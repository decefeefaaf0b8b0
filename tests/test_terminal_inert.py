"""Issue 25 items 5 and 6: a crafted log's End `state`, Header `run_id`, a run directory's name and bidi
controls never reach a terminal raw: not in `ls`, the headless views, the app, nor an error message."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from loratui import cli, events
from loratui.eventlog import EventWriter
from loratui.rundir import RunDir
from loratui.sources.runlog import ListSource
from loratui.text import inert
from loratui.tui.app import LoratuiApp, farewell
from loratui.tui.widgets.status import StatusBar

ESC = "\x1b"
BIDI = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e",
        "\u200f", "\u061c"]
OSC52 = f"{ESC}]52;c;aGVsbG8K\x07"  # write the clipboard
RESET = f"{ESC}c"  # reset the terminal
HOSTILE_STATE = f"{RESET}finished{OSC52}\u202e{ESC}[5;5Hdrawn"
HOSTILE_NAME = f"run{ESC}]0;pwned title\x07\u202etxt.exe{RESET}"


def _raw(text: str) -> list[str]:
    """The characters in `text` a terminal would obey (C0 but tab/newline, DEL, C1, bidi controls)."""
    return [ch for ch in text if (ord(ch) < 0x20 and ch not in "\n\t") or 0x7F <= ord(ch) <= 0x9F or ch in BIDI]


@pytest.mark.parametrize("control", BIDI)
def test_bidi_controls_are_shown_not_obeyed(control: str) -> None:
    shown = inert(f"evil{control}txt.exe")
    assert shown == f"evil<U+{ord(control):04X}>txt.exe" and not _raw(shown)


def _hostile_run(runs: Path) -> RunDir:
    path = runs / HOSTILE_NAME
    path.mkdir(parents=True)
    log = EventWriter(path / "events.jsonl")
    for event in (events.Header(t=1.0, schema=1, run_id=HOSTILE_NAME, recipe_hash="h", name=HOSTILE_NAME),
                  events.State(t=2.0, state=f"training{OSC52}", reason=f"why{RESET}\u2066"),
                  events.End(t=3.0, state=HOSTILE_STATE, step=0)):
        log.write(event)
    log.close()
    return RunDir(path)


def test_ls_shows_a_hostile_run_name_and_end_state_inert(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _hostile_run(tmp_path / "runs")
    assert cli.main(["ls", "--runs-dir", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "finished" in out and "txt.exe" in out and not _raw(out)


def test_headless_follow_prints_the_hostile_run_inert(tmp_path: Path) -> None:
    from loratui.tui.headless import follow

    out = io.StringIO()
    follow(_hostile_run(tmp_path / "runs"), out=out, poll_s=0.0)
    printed = out.getvalue()
    assert "finished" in printed and "txt.exe" in printed and not _raw(printed)


def test_replay_headless_and_summary_print_the_hostile_run_inert(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    run = _hostile_run(tmp_path / "runs")
    assert cli.main(["replay", str(run.path), "--headless"]) == 0
    out = capsys.readouterr().out
    assert "finished" in out and not _raw(out)
    assert cli.main(["replay", str(run.path), "--summary"]) == 0
    assert not _raw(capsys.readouterr().out)


def test_an_error_message_naming_a_hostile_run_is_inert(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    _hostile_run(tmp_path / "runs")
    assert cli.main(["stop", "run", "--runs-dir", str(tmp_path / "runs")]) == 2  # ended: nothing to stop
    err = capsys.readouterr().err
    assert "txt.exe" in err and not _raw(err)


async def test_the_app_and_its_farewell_show_the_hostile_run_inert(tmp_path: Path) -> None:
    run = _hostile_run(tmp_path / "runs")
    found = [events.Header(t=1.0, schema=1, run_id=HOSTILE_NAME, recipe_hash="h", name=HOSTILE_NAME),
             events.State(t=2.0, state=f"training{OSC52}"), events.End(t=3.0, state=HOSTILE_STATE, step=0)]
    app = LoratuiApp(ListSource(found))
    async with app.run_test(size=(120, 30)) as pilot:
        for _ in range(200):
            await pilot.pause(0.05)
            if app.run_state.end is not None:
                break
        await pilot.pause(0.3)
        shown = app.query_one(StatusBar).text
    assert "FINISHED" in shown and "txt.exe" in shown and not _raw(shown)
    said = farewell(run, app.run_state, None)
    assert "txt.exe" in said and not _raw(said)


def test_doctor_and_a_stack_dump_name_a_hostile_run_inert(tmp_path: Path) -> None:
    from loratui.commands.doctor import render
    from loratui.supervisor.stacks import render as render_stacks

    shown = render([], tmp_path / HOSTILE_NAME, "a run directory")
    assert "txt.exe" in shown and not _raw(shown)
    dump = events.Stacks(t=1.0, reason="k", ranks={"0": f'File "/w/{HOSTILE_NAME}.py", line 3 in {OSC52}step'})
    shown = render_stacks(dump)
    assert "txt.exe" in shown and "step" in shown and not _raw(shown)


async def test_every_dialog_and_page_shows_its_text_inert() -> None:
    """The one place a dialog's text reaches Textual: whatever a caller forgot, a page never acts."""
    from textual.widgets import Static

    from loratui.tui.screens import Choice, TextScreen

    app = LoratuiApp(ListSource([]))
    async with app.run_test(size=(100, 30)) as pilot:
        for screen in (TextScreen(f"stack {HOSTILE_STATE}"), Choice(f"restart {HOSTILE_NAME}?", [("y", "Yes", "y")])):
            await app.push_screen(screen)
            await pilot.pause(0.2)
            shown = str(screen.query_one(Static).render())
            assert ("drawn" in shown or "txt.exe" in shown) and not _raw(shown)
            app.pop_screen()
            await pilot.pause(0.1)
