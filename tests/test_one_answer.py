"""Issue 24 item 4: one advisor result per run, the same first advice on every surface.

A real user script (tests/data/scripts/seed_trainer.py, a plain Trainer QLoRA-style script that knows
nothing of loratui) runs watched under `loratui run --headless --`: once running out of memory at step 2
(its own raised CUDA OOM, the message of a 32 GiB card), once with a LoRA weight turned NaN after step 4.
Each surface reads the run its own way: the headless viewer's printed notice (the alert the supervisor
raised while the run went), the alert recorded in the log, `doctor RUN`, `replay RUN --headless --summary`,
and the live panel (the app on the log, as a viewer opened at the start and one attached at the end).
Their first advice must be one line, naming the TrainingArguments field and its new value.
"""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path

import msgspec
import pytest

from loratui import events
from loratui.commands.doctor import render
from loratui.logic.runstate import RunState
from loratui.logic.summary import summarize
from loratui.supervisor.watch import RunWatch
from loratui.tui.headless import print_end
from loratui.eventlog import read_log
from loratui.logic.advisor import Advisor
from loratui.logic.advisor.render import change_line, first_advice, headline
from loratui.logic.estimate import estimate
from loratui.logic.priced_moves import MIN_SAVING, price_moves, shape_facts
from loratui.recipe import Recipe, load_recipe
from loratui.rundir import RunDir
from loratui.sources.runlog import ListSource
from loratui.tui.app import LoratuiApp, live_app
from loratui.tui.widgets.advice_panel import AdvicePanel
from tests import scenarios
from tests.conftest import REPO, SMALL_QWEN2, kinds, loratui, only_run
from tests.test_watch_runs import ENV, SCRIPTS, model_dir, watch_dir  # noqa: F401 (fixtures)

OOM_LINE = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
            "capacity of 31.36 GiB of which 1.12 GiB is free. Of the allocated memory 29.10 GiB is allocated "
            "by PyTorch, and 0.61 GiB is reserved by PyTorch but unallocated.")


def _small(batch: int = 4) -> Recipe:
    """A small model's QLoRA-free LoRA: the estimate is ~2 GiB, far under a 32 GiB card."""
    r = load_recipe(REPO / "recipes/tiny.toml")
    return msgspec.structs.replace(r, training=msgspec.structs.replace(
        r.training, per_device_train_batch_size=batch, gradient_accumulation_steps=1, learning_rate=2e-4))


def _estimated(recipe: Recipe) -> events.Estimate:
    found = estimate(recipe, SMALL_QWEN2)
    return events.Estimate(t=0.5, peak_device_gib=found.peak_device_gib,
                           peak_reserved_gib=found.peak_reserved_gib, components=found.components, config=shape_facts(SMALL_QWEN2),
                           seq=recipe.data.max_length)


def test_no_move_is_offered_that_saves_under_one_percent_of_the_peak() -> None:
    moves = price_moves(_small(), SMALL_QWEN2, line_gib=30.0)
    assert moves and all(m.now_gib - m.peak_gib >= MIN_SAVING * m.now_gib for m in moves)
    assert not any(m.change == {"training.use_liger_kernel": True} for m in moves)  # a 2048-token vocab


def test_an_estimate_under_the_line_prices_no_move_for_an_oom() -> None:
    """The issue's `use_liger_kernel = true: predicted peak 1.90 GiB (now 1.90)`: an estimate that fits
    cannot say which move makes an OOM fit; the recipe's own rule (halve the batch) speaks."""
    recipe = _small()
    adv = Advisor(recipe).feed_all([_estimated(recipe), events.State(t=1.0, state="training"),
                                    events.Output(t=2.0, stream="stderr", lines=[OOM_LINE])])
    top = adv.items()[0]
    assert top.id == "oom_full" and "predicted peak" not in top.title
    assert top.change == {"training.per_device_train_batch_size": 2,
                          "training.gradient_accumulation_steps": 2}


def test_a_watched_runs_settings_event_gives_every_fold_the_same_recipe() -> None:
    """A viewer that opened before train begin (no recipe) and doctor (the run's recipe.toml) agree."""
    recipe = _small()
    text = (REPO / "recipes/tiny.toml").read_text().replace("learning_rate = ", "learning_rate = 2e-4 # ", 1)
    assert load_recipe("recipe.toml", text).training.learning_rate == 2e-4
    nan = [events.Settings(t=0.4, recipe=text), events.TrainBegin(t=0.6, max_steps=8, num_epochs=1.0),
           events.Log(t=1.0, step=4, values={"loss": 6.5, "grad_norm": 1.9, "learning_rate": 1.4e-4}),
           events.Log(t=2.0, step=5, values={"loss": 0.0, "grad_norm": "NaN", "learning_rate": 1e-4})]
    blind, told = Advisor(None).feed_all(nan).items()[0], Advisor(recipe).feed_all(nan).items()[0]
    assert blind.title == told.title
    assert headline([told]) == "Loss became nan at step 5: lower learning_rate from 0.0002 to 6.7e-05"
    assert change_line(blind.change) == "training.learning_rate = 6.7e-05"



def _nan_to_the_end() -> list[events.AnyEvent]:
    found = scenarios.nan_run()
    return found + [events.End(t=found[-1].t + 1, state=events.FINISHED, exit_code=0, step=50)]


RECIPE_LOGS = {"oom": scenarios.failed_oom, "nan": _nan_to_the_end}


@pytest.mark.parametrize("kind", sorted(RECIPE_LOGS))
async def test_a_recipe_runs_oom_and_nan_read_the_same_on_every_surface(kind: str) -> None:
    """Each surface's own function on the same recipe-run log: the app's panel, headless's end, the
    supervisor's alert, doctor's text and replay's summary give one first line, naming the recipe key."""
    recipe = load_recipe(REPO / "recipes/qwen7b.toml")
    found = RECIPE_LOGS[kind]()
    items = Advisor(recipe).feed_all(found).items()
    first = items[0].title
    assert first and any(key.startswith("training.") or key.startswith("env.") for key in items[0].change)
    alerts: list[events.AnyEvent] = []
    RunWatch("r", recipe, write=alerts.append).feed(found)
    said = [e.message for e in alerts if isinstance(e, events.Notice) and e.key == "alert"]
    assert any(message == first or message.endswith(f": {first}") for message in said), (said, first)
    out = io.StringIO()
    print_end(RunState().feed_all(found), out, items)
    assert f"advice: {first}" in out.getvalue().splitlines()
    assert render(items, "run", "").splitlines()[3] == f"  {first}"
    assert summarize(RunState().feed_all(found), "", [], first_advice(items))["advice"]["title"] == first
    app = LoratuiApp(ListSource(found), recipe)
    assert await _panel_first(app) == first


def _watched(runs: Path, model: Path, out: Path, *extra: str) -> tuple[Path, str]:
    command = [sys.executable, str(SCRIPTS / "seed_trainer.py"), "--model", str(model), "--out", str(out),
               *extra]
    result = loratui("run", "--headless", "--runs-dir", str(runs), "--", *command, timeout=900, env=ENV)
    return only_run(runs), result.stdout


def _doctor_first(run: Path) -> str:
    result = loratui("doctor", str(run))
    lines = result.stdout.splitlines()
    return lines[3].strip()  # "RUN: 1 finding (...)", "", "ERROR   id  (step N)", "  <title>"


def _summary_first(run: Path) -> dict[str, object]:
    result = loratui("replay", str(run), "--headless", "--summary")
    advice = json.loads(result.stdout)["advice"]
    assert advice is not None, result.stdout
    return advice  # type: ignore[no-any-return]


async def _panel_first(app: LoratuiApp) -> str:
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(200):
            await pilot.pause(0.05)
            if app.run_state.end is not None:
                break
        await pilot.pause(0.3)
        panel = app.query_one(AdvicePanel)
        assert panel.items
        return str(panel.items[0].title)


async def _surfaces(run: Path, headless_out: str, alert_title: str) -> tuple[str, dict[str, object]]:
    first = _doctor_first(run)
    summary = _summary_first(run)
    assert summary["title"] == first
    alerts = [str(e["message"]) for e in kinds(run, "alert") if e.get("key") == "alert"] or \
        [str(e["message"]) for e in kinds(run, "notice") if e.get("key") == "alert"]
    headed = first if first.lower().startswith(alert_title.lower()) else f"{alert_title}: {first}"  # said once
    assert headed in alerts, (alerts, first)
    assert f"notice: {headed}" in headless_out.splitlines(), headless_out
    assert f"advice: {first}" in headless_out.splitlines(), headless_out  # said again at the end
    # A viewer opened before the Trainer said its settings (no recipe yet) and one attached at the end.
    opened = LoratuiApp(ListSource(read_log(run / "events.jsonl").events), None)
    assert await _panel_first(opened) == first
    assert await _panel_first(live_app(RunDir(run), None)) == first
    return first, summary


@pytest.mark.slow
async def test_an_oom_gets_one_answer_everywhere(model_dir: Path, watch_dir: Path, tmp_path: Path) -> None:
    run, out = _watched(watch_dir, model_dir, tmp_path / "out", "--max-steps", "50", "--fail-at", "2")
    first, summary = await _surfaces(run, out, "CUDA out of memory")
    # The estimate (a tiny model: ~2 GiB) says this run fits a 32 GiB card, so it cannot price a move for
    # this OOM: the batch is halved, accumulation raised, in the script's own field names.
    assert "per_device_train_batch_size 4 -> 2, gradient_accumulation_steps 1 -> 2" in first, first
    assert summary["change"] == ("TrainingArguments.per_device_train_batch_size = 2, "
                                 "TrainingArguments.gradient_accumulation_steps = 2"), summary
    shutil.rmtree(tmp_path / "out", ignore_errors=True)


@pytest.mark.slow
async def test_a_nan_gets_one_answer_everywhere(model_dir: Path, watch_dir: Path, tmp_path: Path) -> None:
    run, out = _watched(watch_dir, model_dir, tmp_path / "out", "--max-steps", "8", "--nan-at", "4")
    first, summary = await _surfaces(run, out, "NaN/Inf loss")
    # The script's learning_rate (2e-4), not the scheduler's value at the NaN step, and a third of it.
    assert first == "Loss became nan at step 5: lower learning_rate from 0.0002 to 6.7e-05", first
    assert summary["change"] == "TrainingArguments.learning_rate = 6.7e-05", summary
