"""`loratui run -- COMMAND` without processes: the output reader, the command's words, the footer, the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from loratui import events
from loratui.logic import command_keys
from loratui.logic.advisor import Advisor
from loratui.logic.text_reader import TextReader
from loratui.logic.runstate import RunState
from loratui.recipe import load_recipe
from loratui.sources.runlog import ListSource
from loratui.supervisor.watch_output import OutputWatcher
from loratui.tui.app import LoratuiApp
from tests import scenarios
from tests.conftest import REPO, loratui
from tests.test_app import Sent, _footer_keys, _settle

BAR = "train:  {pct}%|###       | {n}/{total} [00:01<00:04,  8.50it/s, loss={loss}]"


def _kinds(found: list[events.AnyEvent]) -> list[str]:
    return [type(e).__name__ for e in found]


def _feed(watcher: OutputWatcher, *lines: str) -> list[events.AnyEvent]:
    return [e for line in lines for e in watcher.feed(line)] + watcher.close()


def test_a_tqdm_bar_opens_training_and_gives_steps_and_losses() -> None:
    watcher = OutputWatcher(clock=lambda: 5.0)
    assert watcher.feed("train:   0%|          | 0/40 [00:00<?, ?it/s]") == []
    found = _feed(watcher, BAR.format(pct=10, n=4, total=40, loss="2.5"),
                  BAR.format(pct=10, n=4, total=40, loss="2.5"), BAR.format(pct=20, n=8, total=40, loss="2.1"))
    assert _kinds(found)[:2] == ["TrainBegin", "State"]
    begin = found[0]
    assert begin.max_steps == 40 and begin.pause_mode == "signal"  # type: ignore[union-attr]
    assert set(begin.controls) == {"pause", "resume", "stop"}  # type: ignore[union-attr]
    steps = [e for e in found if isinstance(e, events.Step)]
    assert [s.step for s in steps] == [4, 8]  # a redraw of the same step is no new step
    assert steps[0].step_time == pytest.approx(1 / 8.5)
    assert [(e.step, e.values["loss"]) for e in found if isinstance(e, events.Log)] == [(4, 2.5), (8, 2.1)]


@pytest.mark.parametrize("line", [
    "Loading weights: 100%|##########| 50/50 [00:00<00:00, 11177.66it/s]",
    "Map: 100%|##| 256/256 [00:00<00:00, 5000.00 examples/s]",
    "Writing model shards: 100%|##########| 1/1 [00:00<00:00, 35.48it/s]",
    "Evaluating:  50%|#####     | 5/10 [00:01<00:01,  4.20it/s]",
    # TRL's SFTTrainer prepares its dataset with bars before training starts
    "Adding EOS to train dataset: 100%|##########| 256/256 [00:00<00:00, 9000.00 examples/s]",
    "Tokenizing train dataset:  50%|#####     | 128/256 [00:00<00:00, 3000.00 examples/s]",
    "Truncating train dataset: 100%|##########| 256/256 [00:00<00:00, 3000.00 examples/s]",
])
def test_loading_preprocessing_and_eval_bars_are_not_training(line: str) -> None:
    assert OutputWatcher().feed(line) == []


@pytest.mark.parametrize(("line", "loss"), [
    ("step 5 loss=1.25", 1.25), ("step 5 | loss: 0.5", 0.5), ("{'loss': 3e-1, 'grad_norm': 2.0}", 0.3),
    ("step 5 loss=nan", "NaN"),
])
def test_printed_losses(line: str, loss: object) -> None:
    watcher = OutputWatcher(clock=lambda: 1.0)
    watcher.feed(BAR.format(pct=1, n=1, total=100, loss="9"))
    logs = [e for e in _feed(watcher, line) if isinstance(e, events.Log)]
    assert logs and logs[-1].values["loss"] == loss


def test_steps_from_loss_lines_without_a_bar() -> None:
    watcher = OutputWatcher(clock=lambda: 1.0)
    found = _feed(watcher, "step 1 loss=3.0", "step 2 loss=2.5", "step 3 loss=2.0")
    assert [e.step for e in found if isinstance(e, events.Step)] == [1, 2, 3]
    assert [e.values["loss"] for e in found if isinstance(e, events.Log)] == [3.0, 2.5, 2.0]


@pytest.mark.parametrize("lines", [
    ("step 1/30 loss=3.0", "step 2/30 loss=2.5"), ("Step 1/30 | loss: 3.0", "Step 2/30 | loss: 2.5"),
    ("[1/30] loss=3.0", "[2/30] loss=2.5"), ("iter 1/30 loss 3.01", "iter 2/30 loss 2.51"),
])
def test_a_plain_scripts_step_counter_gives_the_total(lines: tuple[str, ...]) -> None:
    found = _feed(OutputWatcher(clock=lambda: 1.0), *lines)
    assert [e.max_steps for e in found if isinstance(e, events.TrainBegin)] == [30]


@pytest.mark.parametrize("lines", [
    ("epoch 1/3 loss=3.0", "epoch 2/3 loss=2.5"), ("Epoch [1/3] loss=3.0", "Epoch [2/3] loss=2.5"),
    ("epoch 1/3 step 1 loss=3.0", "epoch 1/3 step 2 loss=2.5"),
])
def test_an_epoch_counter_is_no_step_total(lines: tuple[str, ...]) -> None:
    found = _feed(OutputWatcher(clock=lambda: 1.0), *lines)
    assert [e.max_steps for e in found if isinstance(e, events.TrainBegin)] == [0]


def test_one_bar_per_epoch_counts_on() -> None:
    watcher = OutputWatcher(clock=lambda: 1.0)
    found = _feed(watcher, BAR.format(pct=90, n=9, total=10, loss="1"),
                  BAR.format(pct=100, n=10, total=10, loss="1"), BAR.format(pct=20, n=2, total=10, loss="1"))
    assert [e.step for e in found if isinstance(e, events.Step)][-1] == 12


@pytest.mark.parametrize(("command", "name"), [
    (["python", "train.py", "--lr", "1e-4"], "train"),
    (["torchrun", "--nproc_per_node", "2", "scripts/sft.py"], "sft"),
    (["llamafactory-cli", "train", "examples/qwen_lora.yaml"], "qwen_lora"),
    (["python", "-m", "axolotl.cli.train", "cfg.yml"], "cfg"),
    (["accelerate", "launch", "-m", "mypkg.train"], "train"),
    (["./run.sh"], "run"),
])
def test_run_name_comes_from_the_script_or_config(command: list[str], name: str) -> None:
    assert command_keys.run_name(command) == name


def test_advice_speaks_the_commands_words() -> None:
    change = {"training.per_device_train_batch_size": 2, "data.max_length": 512, "quantization.load_in_4bit": True,
              "env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    python = command_keys.speak(change, command_keys.PYTHON).change
    assert python["TrainingArguments.per_device_train_batch_size"] == 2
    assert python["BitsAndBytesConfig.load_in_4bit"] is True and "env.PYTORCH_CUDA_ALLOC_CONF" in python
    factory = command_keys.speak(change, command_keys.LLAMAFACTORY, "examples/x.yaml").change
    assert factory == {"per_device_train_batch_size (x.yaml)": 2, "cutoff_len (x.yaml)": 512,
                       "quantization_bit (x.yaml)": 4, "env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    axolotl = command_keys.speak(change, command_keys.AXOLOTL, "x.yml").change
    assert "micro_batch_size (x.yml)" in axolotl and "sequence_len (x.yml)" in axolotl


def test_environment_summary_drops_secrets() -> None:
    summary = command_keys.env_summary({"HF_TOKEN": "hf_abc", "WANDB_API_KEY": "k", "CUDA_VISIBLE_DEVICES": "0,1",
                                        "AWS_SECRET_ACCESS_KEY": "s", "HOME": "/root", "NCCL_DEBUG": "INFO"})
    assert summary == {"CUDA_VISIBLE_DEVICES": "0,1", "HF_TOKEN": "<redacted>", "NCCL_DEBUG": "INFO",
                       "WANDB_API_KEY": "<redacted>"}


def _watched(command: list[str]) -> list[events.AnyEvent]:
    found = list(scenarios.failed_oom())
    header = found[0]
    assert isinstance(header, events.Header)
    return [msgspec.structs.replace(header, command=command, controls=["stop"]), *found[1:]]


def test_advisor_names_trainingarguments_and_ignores_the_placeholder_recipe(tmp_path: object) -> None:
    placeholder = load_recipe("recipe.toml", '[model]\npath = "loratui:watched"\n[data]\ndataset = "loratui:watched"\n'
                              "[monitor]\nwarn_gb = 20\n")
    advisor = Advisor(placeholder).feed_all(_watched(["python", "train.py"]))
    changes = [key for item in advisor.items() for key in item.change]
    assert changes and all(not key.startswith(("training.", "data.", "lora.", "quantization.")) for key in changes)
    assert advisor.recipe is None  # moves from recipe defaults would be made up


async def test_footer_offers_only_what_the_command_obeys() -> None:
    begin = events.TrainBegin(t=scenarios.T0 + 1, max_steps=100, num_epochs=0, controls=["pause", "resume", "stop"],
                              pause_mode="signal")
    found = [*_watched(["python", "loop.py"])[:3], begin,
             events.State(t=scenarios.T0 + 1, state=events.TRAINING)]
    app = LoratuiApp(ListSource(found), send=Sent())
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(pilot, app, 0)
        assert app.run_state.controls == {"pause", "resume", "stop"}
        assert app.check_action("control", ("pause",))
        assert not app.check_action("control", ("suspend",)) and not app.check_action("control", ("save",))
        assert not app.check_action("apply_advice", ())
        assert {"P", "s", "A"}.isdisjoint(_footer_keys(app)) and "p" in _footer_keys(app)


def test_a_command_before_its_trainer_speaks_offers_only_stop() -> None:
    state = RunState().feed_all(_watched(["python", "x.py"])[:1])
    assert state.controls == {"stop"} and state.command == ["python", "x.py"]


@pytest.mark.parametrize(("args", "message"), [
    (["run", str(REPO / "recipes" / "tiny.toml"), "--", "python", "x.py"], "not both"),
    (["run", "--", "no-such-program-xyz", "a"], "not a program on PATH"),
    (["run", "--", "python", "nosuch.py"], "the script nosuch.py does not exist (looked in "),  # trial 13
    (["run", "--", "python", "-u", "-W", "ignore", "sub/nosuch.py", "--lr", "1"], "the script sub/nosuch.py does"),
    (["run"], "`loratui run tiny`"),
    (["run", "--max-steps", "5", "--", "python", "x.py"], "--max-steps: applies to recipes only"),
    (["run", "--model-path", "m", "--", "python", "x.py"], "--model-path: applies to recipes only"),
    (["run", str(REPO / "recipes" / "tiny.toml"), "--warn-gb", "20"], "[monitor] warn_gb"),
])
def test_run_command_line_mistakes_get_one_message(args: list[str], message: str, tmp_path: object) -> None:
    result = loratui(*args, "--runs-dir", str(tmp_path)) if "--" not in args else loratui(
        *args[:args.index("--")], "--runs-dir", str(tmp_path), *args[args.index("--"):])
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_run_help_shows_both_forms_and_every_option_says_what_it_does() -> None:
    result = loratui("run", "--help")
    assert result.returncode == 0 and "-- COMMAND [ARGS...]" in result.stdout.split("options:")[0]
    from loratui.cli import build_parser
    run_parser = next(a for a in build_parser()._subparsers._group_actions[0].choices.items() if a[0] == "run")[1]
    silent = [a.option_strings for a in run_parser._actions if a.option_strings and not a.help]
    assert silent == [], f"options with no help text: {silent}"


def test_a_runs_dir_too_deep_for_the_control_socket_is_refused_up_front(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60)
    result = loratui("run", "--headless", "--runs-dir", str(deep), "--", sys.executable, "-c", "pass")
    assert result.returncode == 2 and "control socket path" in result.stderr and "--runs-dir" in result.stderr
    assert not any(deep.iterdir())  # no half-made run left behind


def test_import_loratui_stays_light_and_the_callback_is_lazy() -> None:
    code = ("import sys, loratui; assert 'transformers' not in sys.modules; "
            "cb = loratui.LoratuiCallback(); assert cb.inner is None and not cb.run_dir; print('ok')")
    env = {k: v for k, v in __import__("os").environ.items() if k != "LORATUI_RUN_DIR"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.stdout.strip() == "ok", result.stderr[-2000:]


@pytest.mark.slow  # imports transformers in a fresh interpreter
def test_the_startup_hook_is_lazy_patches_trainer_and_runs_the_sitecustomize_it_shadows(tmp_path: Path) -> None:
    from loratui.supervisor.command import HOOK_DIR

    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import os\nos.environ['THEIRS_RAN'] = '1'\n")
    code = ("import os, sys\nlight = 'transformers' not in sys.modules and 'torch' not in sys.modules\n"
            "import torch\nfrom transformers import Trainer, TrainingArguments\n"
            "unloaded = not any(m.startswith('loratui') for m in sys.modules)  # until a Trainer is built\n"
            "Trainer(model=torch.nn.Linear(2, 2), args=TrainingArguments(output_dir='out', use_cpu=True, "
            "report_to='none'))\n"
            "print(light, os.environ.get('THEIRS_RAN'), unloaded, getattr(Trainer, '_loratui_patched', False))\n")
    env = dict(__import__("os").environ, LORATUI_RUN_DIR=str(tmp_path),
               PYTHONPATH=f"{HOOK_DIR}:{REPO}:{theirs}")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300,
                            check=False, cwd=tmp_path)
    assert result.stdout.split() == ["True", "1", "True", "True"], result.stderr[-3000:]


def test_checkpointing_turned_on_through_the_model_is_seen(tmp_path: Path) -> None:
    """LLaMA-Factory calls `model.gradient_checkpointing_enable()` and leaves TrainingArguments' flag
    False: the live recipe must say it is on, or the advisor proposes turning on what is already on."""
    from transformers import Qwen2Config, Qwen2ForCausalLM, TrainingArguments

    from loratui.trainer.preflight import live_recipe
    from tests.conftest import SMALL_QWEN2

    model = Qwen2ForCausalLM(Qwen2Config(**{k: v for k, v in SMALL_QWEN2.items() if k != "model_type"}))
    args = TrainingArguments(output_dir=str(tmp_path), gradient_checkpointing=False, report_to=[])
    assert live_recipe(args, model, 128, 128, 30.0).training.gradient_checkpointing is False
    model.gradient_checkpointing_enable()
    assert live_recipe(args, model, 128, 128, 30.0).training.gradient_checkpointing is True


@pytest.mark.parametrize("lines", [
    ("Epoch [1/3], Step [10/30], Loss: 3.0", "Epoch [1/3], Step [20/30], Loss: 2.5", "Epoch [2/3], Step [10/30], Loss: 2.0"),
    ("epoch 1/3 step 10/30 loss=3.0", "epoch 1/3 step 20/30 loss=2.5", "epoch 2/3 step 10/30 loss=2.0"),
    ("Epoch: 1/3 | Iter: 10/30 | loss 3.0", "Epoch: 1/3 | Iter: 20/30 | loss 2.5", "Epoch: 2/3 | Iter: 10/30 | loss 2.0"),
])
def test_a_step_counted_within_its_epoch_gives_the_runs_step(lines: tuple[str, ...]) -> None:
    """The PyTorch tutorial's `Epoch [2/3], Step [10/30]` counts the loader's batches from 1 again each epoch: the
    run's step is the epochs before times the batches of one, plus this batch (not the epoch's number), and the
    run's total is the epochs times the batches."""
    found = _feed(OutputWatcher(clock=lambda: 1.0), *lines)
    assert [e.step for e in found if isinstance(e, events.Log)] == [10, 20, 40]
    assert [e.max_steps for e in found if isinstance(e, events.TrainBegin)] == [90]


def test_a_printed_epoch_is_the_steps_epoch() -> None:
    """A loop printing HF-style dicts with their epoch: the status bar read `ep --` for the whole run."""
    lines = [f"{{'loss': {2 - i / 10}, 'learning_rate': 1e-4, 'epoch': {i / 4}}}" for i in range(1, 5)]
    found = _feed(OutputWatcher(clock=lambda: 1.0), *lines)
    assert [(e.step, e.epoch) for e in found if isinstance(e, events.Step)] == [(1, .25), (2, .5), (3, .75), (4, 1)]


def test_a_bar_step_carries_the_last_printed_epoch() -> None:
    watcher = OutputWatcher(clock=lambda: 1.0)
    found = _feed(watcher, BAR.format(pct=10, n=4, total=40, loss="2.5"), "{'loss': 2.4, 'epoch': 0.1}",
                  BAR.format(pct=20, n=8, total=40, loss="2.1"))
    assert [(e.step, e.epoch) for e in found if isinstance(e, events.Step)] == [(4, 0.0), (8, 0.1)]


@pytest.mark.parametrize(("lines", "steps", "total"), [
    # a whole-run counter beside the epoch: it does not restart when the epoch changes, read as it is
    (("epoch 1/3 step 100/900 loss=3.0", "epoch 1/3 step 200/900 loss=2.8", "epoch 2/3 step 400/900 loss=2.5",
      "epoch 3/3 step 700/900 loss=2.0"), [100, 200, 400, 700], 900),
    (("Epoch 1/3 | Step 300/900 | loss 3.0", "Epoch 2/3 | Step 400/900 | loss 2.5"), [300, 400], 900),
    # a per-epoch counter: it restarts at the next epoch
    (("Epoch [1/3], Step [5/30], Loss: 3.0", "Epoch [1/3], Step [10/30], Loss: 2.8",
      "Epoch [2/3], Step [5/30], Loss: 2.5"), [5, 10, 35], 90),
])
def test_the_series_says_whether_a_counter_beside_the_epoch_counts_the_run_or_the_epoch(
        lines: tuple[str, ...], steps: list[int], total: int) -> None:
    """`epoch 2/3 step 400/900` counts the run's steps (it did not start again at epoch 2): read as step 400, not
    the per-epoch 1300; `Epoch [2/3], Step [5/30]` after `Step [10/30]` of epoch 1 started again: step 35."""
    found = _feed(OutputWatcher(clock=lambda: 1.0), *lines)
    assert [e.step for e in found if isinstance(e, events.Log)] == steps
    assert [e.max_steps for e in found if isinstance(e, events.TrainBegin)][-1] == total


@pytest.mark.parametrize(("line", "step"), [
    ("Epoch [3/3], Step [12/30], Loss: 2.0", 72),  # 12 is not within a whole run's third epoch (20..30): per-epoch
    ("Epoch [1/3], Step [25/30], Loss: 2.0", 25),  # the first epoch's step is the run's either way
    ("epoch 2/3 step 400/900 loss=2.5", None),  # 400 fits both readings: no step is read from it
])
def test_one_line_alone_reads_the_counter_only_where_the_numbers_allow_one_reading(line: str, step: int | None) -> None:
    from loratui.logic.text_reader.values import line_step

    assert line_step(line) == step


async def test_the_status_bar_shows_the_epoch_of_a_counter_within_the_epoch() -> None:
    """A watched script printing `Epoch [3/3], Step [12/30]` showed `ep --`: its epochs done are 2 and 12/30."""
    from loratui.tui.widgets.status import StatusBar
    from tests.test_app import FakeClock, _folded

    lines = [f"Epoch [{e}/3], Step [{n}/30], Loss: {3 - e / 2 - n / 100:.3f}" for e in (1, 2, 3) for n in (6, 12, 18, 24, 30)]
    found = _feed(OutputWatcher(clock=lambda: 1.0), *lines[:12])  # up to Epoch [3/3], Step [12/30]
    app = LoratuiApp(ListSource(found), clock=FakeClock())
    async with app.run_test(size=(80, 24)) as pilot:
        await _folded(pilot, app)
        text = str(app.query_one(StatusBar).render())
    assert app.run_state.step == 72 and " step 72/90 " in text and " ep 2.40 " in text, text


@pytest.mark.parametrize("args", [["run"], ["run", "--", "no-such-program-xyz"],
                                  ["run", "--max-steps", "5", "--", "python", "x.py"]])
def test_a_run_mistake_says_loratui_once(args: list[str], tmp_path: object) -> None:
    """`loratui run` alone printed `loratui: loratui run: give a recipe ...`: the prefix every message gets,
    then the command's name again."""
    cut = args.index("--") if "--" in args else len(args)
    result = loratui(*args[:cut], "--runs-dir", str(tmp_path), *args[cut:])
    assert result.returncode == 2 and result.stderr.startswith("loratui: run"), result.stderr
    assert "loratui: loratui" not in result.stderr, result.stderr


def _log_steps(found: list[events.AnyEvent]) -> list[int]:
    return [e.step for e in found if isinstance(e, events.Log)]


def test_records_waiting_for_a_bar_on_the_other_stream_are_spread_to_its_position() -> None:
    """Dicts on stdout, the bar on stderr, read in turns: three dicts read before the bar's next redraw lie between
    the last record's step and the bar's, at an even spacing, not packed at the bar (28, 29, 30 for 10, 20, 30)."""
    watcher = OutputWatcher(clock=lambda: 5.0)
    bar = "{n}/60 [00:01<00:04,  8.50it/s]"
    found = _feed(watcher, " 0%|          | " + bar.format(n=0), "{'loss': 2.1}", "{'loss': 1.9}", "{'loss': 1.7}",
                  "50%|#####     | " + bar.format(n=30))
    assert _log_steps(found) == [10, 20, 30]


def test_a_record_read_after_the_bar_ended_does_not_pass_its_end() -> None:
    watcher = OutputWatcher(clock=lambda: 5.0)
    end = "100%|##########| 10/10 [00:01<00:00, 9.1it/s]"
    found = _feed(watcher, " 0%|          | 0/10 [00:00<?, ?it/s]", end, "{'loss': 2.1}", end, "{'loss': 1.9}")
    assert _log_steps(found) == [10, 10]  # the first was placed at the end: the second shares it, not step 11


def test_a_record_read_before_the_bars_first_step_is_kept() -> None:
    """The stdout tail can read a dict before the stderr tail reads the bar's first step: the record opens the
    training (it was dropped, and the run's first loss with it)."""
    watcher = OutputWatcher(clock=lambda: 5.0)
    found = _feed(watcher, "{'loss': 2.5, 'step': 5}", " 8%|#         | 5/60 [00:01<00:04,  8.50it/s]")
    assert _kinds(found)[:2] == ["TrainBegin", "State"]
    assert [(e.step, e.values) for e in found if isinstance(e, events.Log)] == [(5, {"loss": 2.5})]


@pytest.mark.parametrize("key", ["step", "global_step", "iter", "train/global_step"])
def test_a_printed_dicts_own_step_is_its_step(key: str) -> None:
    """In one stream too (a pasted log): the dict's own counter, not the bar drawn before it."""
    reader = TextReader()
    lines = [" 0%|          | 0/100 [00:00<?, ?it/s]", "17%|#         | 17/100 [00:01<00:04,  8.50it/s]",
             f"{{'loss': 2.25, '{key}': 15}}", "20%|##        | 20/100 [00:01<00:04,  8.50it/s]"]
    found = [e for line in lines for e in reader.feed(line)] + reader.close()
    assert [(e.step, e.values) for e in found if isinstance(e, events.Log)] == [(15, {"loss": 2.25})]


def test_a_step_line_is_logged_before_the_text_that_follows_it() -> None:
    """`step 25 loss X` was held back (a second logger may print the same step) until the output closed: a crash's
    traceback after it was read at step 24, and a save's banner after it came before the step's log."""
    reader = TextReader()
    found = [e for line in ("step 24 loss 0.1250", "step 25 loss 0.1200", "Traceback (most recent call last):")
             for e in reader.feed(line)]
    order = [(type(e).__name__, getattr(e, "step", None)) for e in found]
    assert order.index(("Log", 25)) < len(order) - 1 and order[-1] == ("Output", None), order


def test_two_loggers_printing_one_step_are_still_one_log() -> None:
    reader = TextReader()
    found = [e for line in ("step 5 loss 2.3", "[INFO] step 5 loss 2.3 lr 1e-4", "step 6 loss 2.2")
             for e in reader.feed(line)] + reader.close()
    assert [(e.step, e.values) for e in found if isinstance(e, events.Log)] == [
        (5, {"loss": 2.3, "learning_rate": 1e-4}), (6, {"loss": 2.2})]


@pytest.mark.parametrize(("lines", "epochs"), [
    # a float epoch as the Trainer prints it: epochs done, as printed
    (("epoch 0.5 step 5 loss 2.31", "epoch 1.0 step 10 loss 2.05"), [0.5, 1.0]),
    (("ep 0.50 | step 5 | loss 2.31", "ep 1.00 | step 10 | loss 2.05"), [0.5, 1.0]),
    (("epoch=0.25 step=5 loss=2.31", "epoch=0.5 step=10 loss=2.05"), [0.25, 0.5]),
    # an epoch of a total counts from 1: the epochs done before it (the step within it is not known)
    (("Epoch 1/3 step 10 loss=2.31", "Epoch 2/3 step 40 loss=2.05"), [0.0, 1.0]),
    (("Epoch [1/3] step 10 loss=2.31", "Epoch [3/3] step 70 loss=2.05"), [0.0, 2.0]),
    # a bare whole epoch is not read: nothing says whether it counts from 0 or 1 (mmdet's `Epoch [3][10800/12414]`)
    (("epoch 0 step 5 loss 2.31", "epoch 1 step 10 loss 2.05"), [None, None]),
    (("Epoch [3][10800/12414]\tlr: 1.000e-04, loss: 1.8092", "Epoch [3][10850/12414]\tlr: 1.000e-04, loss: 1.8134"),
     [None, None]),
])
def test_a_loss_lines_epoch_is_recorded_as_a_dicts_is(lines: tuple[str, ...], epochs: list[float]) -> None:
    """A plain loop printing `epoch 0.5 step 5 loss 2.31` recorded the step and the loss but no epoch: the Log
    carries it under `epoch` (as a printed `{'loss': ..., 'epoch': 0.5}` does) and the Step it gives carries it."""
    found = _feed(OutputWatcher(clock=lambda: 1.0), *lines)
    assert [e.values.get("epoch") for e in found if isinstance(e, events.Log)] == epochs
    assert [e.epoch for e in found if isinstance(e, events.Step)] == [x or 0.0 for x in epochs]


def test_a_counter_not_yet_known_as_the_runs_or_the_epochs_still_gives_the_epochs_done() -> None:
    """`epoch 1/3 step 100/900` fits a run's counter and an epoch's until the epoch changes: the step is the same
    either way in the first epoch, and so are the epochs done before it (0); once the series tells, the fraction."""
    lines = ("epoch 1/3 step 100/900 loss=3.0", "epoch 1/3 step 200/900 loss=2.8", "epoch 2/3 step 400/900 loss=2.5")
    found = _feed(OutputWatcher(clock=lambda: 1.0), *lines)
    assert [e.values.get("epoch") for e in found if isinstance(e, events.Log)] == [0.0, 0.0, 1.3333]


def test_a_later_training_phase_is_shifted_onto_the_runs_steps_and_a_first_one_is_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's step axis across train() calls in one script (trainer/watch.py `_Phases`): the first phase and a
    later one that resumes past the steps recorded keep their steps; one that starts again is shifted after them."""
    from loratui import phases
    from loratui.trainer import watch

    monkeypatch.setattr(watch._Phases, "count", 0)
    monkeypatch.setattr(watch._Phases, "last_step", 0)
    assert watch._Phases.offset(0) == 0  # the first phase: written as it is
    monkeypatch.setattr(watch._Phases, "count", 1)
    monkeypatch.setattr(watch._Phases, "last_step", 40)
    assert (watch._Phases.offset(0), watch._Phases.offset(30), watch._Phases.offset(40)) == (40, 10, 0)
    begin = phases.shifted(events.TrainBegin(t=1.0, max_steps=60, num_epochs=1.0), 40)
    assert (begin.start_step, begin.max_steps) == (40, 100)
    shifted = [phases.shifted(e, 40) for e in (events.Step(t=1.0, step=1, epoch=0.1, step_time=0.5),
                                                events.Log(t=1.0, step=1, values={"loss": 2.0}),
                                                events.Phase(t=1.0, name="train", edge="begin"),
                                                events.Checkpoint(t=1.0, step=10, path="/o/checkpoint-10"))]
    assert [e.step for e in shifted] == [41, 41, 40, 50] and shifted[3].path == "/o/checkpoint-10"
    notice = events.Notice(t=1.0, level="info", message="m")
    assert phases.shifted(notice, 40) is notice


def _axis(found: list[events.AnyEvent]) -> tuple[list[int], list[tuple[int, float]]]:
    return ([e.step for e in found if isinstance(e, events.Step)],
            [(e.step, e.values["loss"]) for e in found if isinstance(e, events.Log)])  # type: ignore[misc]


def test_a_printed_count_that_starts_again_counts_on_as_a_second_trainers_does() -> None:
    """A plain loop printing `step 1/5 .. step 5/5` twice (a second phase): phase 2's losses were logged at steps
    1..5 again, over phase 1's curve, and its steps were not recorded at all (none passed the last). They are the
    run's steps 6..10 (`loratui.phases`, as a second Trainer's), its TrainBegin starts at 5 of 10, a notice says so."""
    lines = [f"step {n}/5 loss={3.0 / (phase * n):.4f}" for phase in (1, 2) for n in range(1, 6)]
    found = _feed(OutputWatcher(clock=lambda: 1.0), *lines)
    steps, logs = _axis(found)
    assert steps == list(range(1, 11))
    assert logs == [(n + 5 * (phase - 1), round(3.0 / (phase * n), 4)) for phase in (1, 2) for n in range(1, 6)]
    begins = [(e.start_step, e.max_steps) for e in found if isinstance(e, events.TrainBegin)]
    assert begins == [(0, 5), (5, 10)]
    notices = [e.message for e in found if isinstance(e, events.Notice) and e.key == "train_phase"]
    assert len(notices) == 1 and "step 5 + N" in notices[0], notices


@pytest.mark.parametrize(("printed", "recorded"), [
    ([0, 1, 2, 3, 4, 0, 1, 2, 3, 4], list(range(10))),  # a count from 0: its phase starts after the last step
    ([10, 20, 30, 10, 20], [10, 20, 30, 40, 50]),  # a loop printing every 10 steps keeps its 10
    ([1, 2, 3, 1, 2, 3, 1, 2], [1, 2, 3, 4, 5, 6, 7, 8]),  # an epoch counted from 1, three times
    ([1, 2, 3, 4, 5, 3, 6], [1, 2, 3, 4, 5, 3, 6]),  # a step below the last, not where the count began: as it is
    ([1, 2, 3, 3, 4], [1, 2, 3, 4]),  # the same step printed twice (two loggers): one log, no new phase
])
def test_which_printed_steps_begin_a_phase(printed: list[int], recorded: list[int]) -> None:
    lines = [f"step {n} loss={2.0 + index / 100:.2f}" for index, n in enumerate(printed)]
    _, logs = _axis(_feed(OutputWatcher(clock=lambda: 1.0), *lines))
    assert [step for step, _ in logs] == recorded


def test_one_phase_is_recorded_as_it_was() -> None:
    """No count that starts again: no notice, one TrainBegin from 0, every step as printed."""
    found = _feed(OutputWatcher(clock=lambda: 1.0), *[f"step {n}/4 loss={3 - n / 4}" for n in range(1, 5)])
    assert _kinds(found).count("TrainBegin") == 1 and "Notice" not in _kinds(found)
    assert _axis(found)[0] == [1, 2, 3, 4] and found[0] == events.TrainBegin(
        t=1.0, max_steps=4, num_epochs=0.0, controls=["pause", "resume", "stop"], pause_mode="signal")


def test_an_evaluations_count_begins_no_phase() -> None:
    """A loop that validates every few steps, printing `val step 1..2 loss X`: they begin no phase, which would have
    moved every later step of the run, and their losses are the evaluation's (`eval_loss` at the training's step),
    not training losses at steps 1 and 2 (as the reader took them before)."""
    lines = ["step 1 loss=3.0", "step 2 loss=2.8", "step 3 loss=2.6", "val step 1 loss 2.9", "val step 2 loss 2.7",
             "step 4 loss=2.5", "step 5 loss=2.4", "Validation: step 1, loss 2.6", "step 6 loss=2.3"]
    found = _feed(OutputWatcher(clock=lambda: 1.0), *lines)
    steps = [e.step for e in found if isinstance(e, events.Step)]
    logs = [(e.step, dict(e.values)) for e in found if isinstance(e, events.Log)]
    assert steps == [1, 2, 3, 4, 5, 6]
    assert [(step, values["loss"]) for step, values in logs if "loss" in values] == \
        [(1, 3.0), (2, 2.8), (3, 2.6), (4, 2.5), (5, 2.4), (6, 2.3)]
    assert [(step, values) for step, values in logs if "loss" not in values] == \
        [(3, {"eval_loss": 2.9}), (3, {"eval_loss": 2.7}), (5, {"eval_loss": 2.6})]
    assert "Notice" not in _kinds(found) and _kinds(found).count("TrainBegin") == 1
    after_eval = _feed(OutputWatcher(clock=lambda: 1.0), "step 1 loss=3.0", "step 2 loss=2.8", "eval loss 2.9",
                       "step 1 loss=2.7", "step 2 loss=2.6")  # an evaluation's line with no step between phases
    # (the reader took `eval loss 2.9` for a training loss at step 3): phase 2 counts on after step 2
    assert [e.step for e in after_eval if isinstance(e, events.Step)] == [1, 2, 3, 4]
    assert "Notice" in _kinds(after_eval)
    assert [(e.step, dict(e.values)) for e in after_eval if isinstance(e, events.Log) and "loss" not in e.values] == \
        [(2, {"eval_loss": 2.9})]


def test_a_copy_on_the_other_stream_begins_no_phase() -> None:
    """The same `step N loss X` lines printed and logged to stderr too: a round of the tail reads stdout's steps 10
    and 20, then stderr's copy of 10, below the last and where the count began. It read as a second phase, and
    every later step of the run was recorded 20 steps on."""
    lines = ["step 10 loss 2.0", "step 20 loss 1.9", "step 10 loss 2.0", "step 20 loss 1.9", "step 30 loss 1.8",
             "step 30 loss 1.8"]
    found = _feed(OutputWatcher(clock=lambda: 1.0), *lines)
    assert _axis(found)[0] == [10, 20, 30] and "Notice" not in _kinds(found)


@pytest.mark.parametrize(("command", "script"), [
    (["python", "train.py"], "train.py"), (["/venv/bin/python3.11", "-u", "-X", "dev", "t.py", "-m", "x"], "t.py"),
    (["python", "-Wignore", "t.py"], "t.py"), (["python", "-uW", "ignore", "t.py"], "t.py"), (["python", "--", "t.py"],
                                                                                              "t.py"),
    (["python", "-m", "trl", "sft"], None), (["python", "-um", "x"], None), (["python", "-c", "pass"], None),
    (["python"], None), (["python", "-"], None), (["torchrun", "train.py"], None), (["pythonista", "t.py"], None)])
def test_the_script_a_python_command_runs(command: list[str], script: str | None) -> None:
    from loratui.supervisor.launch import python_script

    assert python_script(command) == script


@pytest.mark.parametrize(("line", "evaluation"), [
    ("eval loss 3.10", True), ("validation loss: 3.10", True), ("step 4 val loss 3.10", True),
    ("[val] step 4 | loss 3.10", True), ("Evaluation - loss: 3.10  lr: 0.00050", True),
    ("Iter 4: Val loss 3.10, Val took 61.907s", True),
    ("step 4: train loss 3.10, val loss 2.95", False), ("epoch 1 train loss 3.10 val loss 2.95", False),
    ("4/4 [==============================] - 2s - loss: 3.10 - val_loss: 2.95", False),
    ("step 4 | loss 3.10 | test_acc 0.5", False),
])
def test_a_watched_loops_evaluation_loss_is_no_training_loss(line: str, evaluation: bool) -> None:
    """A plain loop that prints its evaluation's loss beside its training's: the evaluation's line is logged as the
    evaluation's (`eval_loss` at the training's step, as a Trainer's eval dict is); its loss went into the training
    curve (`eval loss 3.10` after step 4's 2.6 was step 5's loss, the real step 5 logged after it). A line whose first
    loss is the training's stays a training loss. A pasted log read by `doctor` keeps reading a validation loss as its
    loss (the reader's default: a text printing only validation losses is judged by them)."""
    found = _feed(OutputWatcher(clock=lambda: 1.0), "step 3 loss 2.7", "step 4 loss 2.6", line, "step 5 loss 2.5")
    logs = [(e.step, dict(e.values)) for e in found if isinstance(e, events.Log)]
    trained = [(step, values["loss"]) for step, values in logs if "loss" in values]
    if evaluation:
        assert trained == [(3, 2.7), (4, 2.6), (5, 2.5)] and (4, {"eval_loss": 3.1}) in logs, logs
    else:
        assert 3.1 in [loss for _, loss in trained] and not any("eval_loss" in values for _, values in logs), logs
    assert [e.step for e in found if isinstance(e, events.Step)] == [3, 4, 5]
    pasted = TextReader()
    read = [e for text in ("step 3 loss 2.7", line) for e in pasted.feed(text)] + pasted.close()
    assert any(isinstance(e, events.Log) and e.values.get("loss") == 3.1 for e in read)


@pytest.mark.parametrize("line", ["val_loss=3.10", "val_loss: 3.10", "eval_loss = 3.10", "valid_loss: 3.10",
                                  "validation_loss=3.10", "test_loss: 3.10", "eval/loss: 3.10", "step 4 val_loss=3.10",
                                  "val_loss=3.10 val_acc=0.52", "VAL_LOSS: 3.10"])
def test_a_bare_named_evaluation_loss_is_the_evaluations_at_the_current_step(line: str) -> None:
    """A plain loop printing `val_loss=2.2` alone on a line (the name Keras, Lightning and hand-written loops give
    it) was read as nothing: its name joins the words with `_`, which the loss reader took for part of another
    word. It is the evaluation's loss at the training's current step, as `eval loss 2.31` is, never a training loss."""
    found = _feed(OutputWatcher(clock=lambda: 1.0), "step 3 loss 2.7", "step 4 loss 2.6", line, "step 5 loss 2.5")
    logs = [(e.step, dict(e.values)) for e in found if isinstance(e, events.Log)]
    assert [(step, values["loss"]) for step, values in logs if "loss" in values] == [(3, 2.7), (4, 2.6), (5, 2.5)]
    assert [(step, values) for step, values in logs if "loss" not in values] == [(4, {"eval_loss": 3.1})], logs
    assert [e.step for e in found if isinstance(e, events.Step)] == [3, 4, 5]


@pytest.mark.parametrize("line", ["4/4 [======] - 2s - loss: 3.10 - val_loss: 2.95", ("epoch 1 train_loss=3.10 "
                                  "val_loss=2.95"), "{'loss': 3.10, 'val_loss': 2.95}", "best_val_loss=2.95 so far"])
def test_a_line_with_the_training_loss_keeps_it(line: str) -> None:
    """Where the line names the training's loss too (Keras' epoch line), it is the training's loss, as before; a
    best-so-far figure is no reading of the evaluation."""
    found = _feed(OutputWatcher(clock=lambda: 1.0), "step 3 loss 2.7", "step 4 loss 2.6", line)
    logs = [dict(e.values) for e in found if isinstance(e, events.Log)]
    assert {"eval_loss": 2.95} not in logs, logs
    assert "best" in line or any(values.get("loss") == 3.1 for values in logs), logs
