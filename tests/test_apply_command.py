"""`loratui apply RUN [ADVICE] [--restart]`: the advice doctor prints, applied from the shell through the code
`A` and the MCP tool apply_advice use (commands/apply.py); a run without advice is told so, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from loratui import cli
from loratui.commands import mcp_server
from loratui.eventlog import EventWriter
from loratui.recipe import load_recipe
from tests import scenarios
from tests.test_apply_advice import _fake_run


def _with(tmp_path: Path, found: list) -> tuple:
    run, source = _fake_run(tmp_path)
    writer = EventWriter(run.events)
    for e in found:
        writer.write(e)
    return run, source


def _apply(tmp_path: Path, *argv: str) -> int:
    return cli.main(["apply", "--runs-dir", str(tmp_path / "runs"), *argv])


def test_apply_writes_the_first_advice_beside_the_recipe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run, source = _with(tmp_path, scenarios.run(60, peak_gib=33.5))
    assert _apply(tmp_path, run.run_id) == 0
    out = capsys.readouterr().out
    written = sorted(source.parent.glob("qwen7b.fix-*.toml"))
    assert len(written) == 1 and f"wrote {written[0]}" in out and f"loratui run {written[0]}" in out
    assert load_recipe(written[0]).training.per_device_train_batch_size == 2
    assert "--restart" in out  # how to restart the run with it instead


def test_apply_by_id_is_the_advice_the_mcp_tool_would_take(tmp_path: Path) -> None:
    run, source = _with(tmp_path, scenarios.run(60, peak_gib=33.5))
    item = mcp_server._advice_item(run, "vram_near_limit")
    assert _apply(tmp_path, run.run_id, item.id) == 0
    assert sorted(p.name for p in source.parent.glob("qwen7b.fix-*.toml")) == ["qwen7b.fix-vram_near_limit.toml"]


def test_a_run_without_advice_is_told_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run, source = _with(tmp_path, scenarios.run(60, peak_gib=10.0))
    assert _apply(tmp_path, run.run_id) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"loratui: {run.run_id} has no advice to apply") and "Traceback" not in err
    assert not list(source.parent.glob("*.fix-*"))


def test_an_unknown_advice_id_is_bad_input_naming_those_it_has(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    run, _ = _with(tmp_path, scenarios.run(60, peak_gib=33.5))
    assert _apply(tmp_path, run.run_id, "no_such") == 2
    err = capsys.readouterr().err
    assert "'no_such'" in err and "vram_near_limit" in err and "Traceback" not in err


def test_doctor_on_a_run_names_the_apply_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run, _ = _with(tmp_path, scenarios.run(60, peak_gib=33.5))
    cli.main(["doctor", str(run.path)])
    out = capsys.readouterr().out
    assert f"apply: loratui apply {run.path} vram_near_limit" in out
    (tmp_path / "quiet").mkdir()
    run2, _ = _with(tmp_path / "quiet", scenarios.run(60, peak_gib=10.0))
    cli.main(["doctor", str(run2.path)])
    assert "loratui apply" not in capsys.readouterr().out  # nothing to apply: no line


async def test_A_in_replay_names_the_apply_command() -> None:
    """Replay only reads a run: `A` on advice it could apply was silent; it now says what writes it."""
    from loratui.tui.replay_app import replay_app
    from tests.conftest import REPO

    app = replay_app(scenarios.run(60, peak_gib=33.5), load_recipe(REPO / "recipes" / "qwen7b.toml"), "r", speed=1000)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        for _ in range(200):
            await pilot.pause(0.05)
            if app.replay.done and app.advisor is not None and any(i.fix for i in app.advisor.items()):
                break
        await pilot.pause(0.5)
        await pilot.press("a", "A")
        await pilot.pause(0.3)
        said = [n.message for n in app._notifications]
    assert any("`loratui apply 20270115-093000-qwen7b vram_near_limit`" in s for s in said), said


def test_a_headless_end_with_advice_names_the_apply_command() -> None:
    """The headless end's `advice:` and `change:` lines (the README's NaN demo) are followed by what applies it."""
    import io

    from loratui.logic.advisor import Advisor
    from loratui.logic.runstate import RunState
    from loratui.tui.headless import print_end
    from tests.conftest import REPO

    found = scenarios.failed_oom()
    items = Advisor(load_recipe(REPO / "recipes" / "qwen7b.toml")).feed_all(found).items()
    out = io.StringIO()
    state = RunState().feed_all(found)
    print_end(state, out, items)
    assert f"  apply: loratui apply {state.run_id} {items[0].id}" in out.getvalue().splitlines(), out.getvalue()


def test_apply_on_a_watched_llamafactory_run_writes_its_config_and_names_the_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The live settings' advice, spoken in the config's keys, goes into a copy of the YAML, as `A` writes it."""
    from tests.test_config_fix import LLAMAFACTORY_YAML, _watched_events, _watched_run

    command = ["llamafactory-cli", "train", "qwen_lora.yaml"]
    run, config = _watched_run(tmp_path, command, LLAMAFACTORY_YAML)
    from loratui import events
    from tests.conftest import REPO

    found = _watched_events(command)  # with the live settings a hooked Trainer records at train begin
    live = events.Settings(t=0.5, recipe=(REPO / "recipes" / "qwen7b.toml").read_text())
    writer = EventWriter(run.events)
    for e in [found[0], live, *found[1:]]:
        writer.write(e)
    assert _apply(tmp_path, run.run_id) == 0
    out = capsys.readouterr().out
    copies = sorted(config.parent.glob("qwen_lora.loratui-fix*.yaml"))
    assert len(copies) == 1 and f"wrote {copies[0]}" in out
    assert "`loratui run -- llamafactory-cli train " in out and copies[0].name in out, out
