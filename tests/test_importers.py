"""Importing trainer_state.json files of several eras, Trainer output directories and stdout logs."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loratui import events
from loratui.logic.runstate import RunState
from loratui.sources import importers
from loratui.sources.open_any import open_any

DATA = Path(__file__).parent / "data"
CLI = [sys.executable, "-c", "import sys; from loratui.cli import main; sys.exit(main())"]
STATES = DATA / "trainer_state"


def _fold(found: list[events.AnyEvent]) -> RunState:
    return RunState().feed_all(found)


@pytest.mark.parametrize(
    ("name", "steps", "final", "max_steps", "end", "evals", "nan_steps"),
    [
        ("v4_3_early.json", [10, 20, 30, 40], 40, 40, events.FINISHED, [(20, 2.65), (40, 2.28)], []),
        # logged to step 4, trained to global_step 8: the run ends at 8 (issue 23)
        ("v4_30_crlf_nan.json", [1, 2, 3, 4], 8, 8, events.FINISHED, [(4, math.nan)], [3, 4]),
        ("v4_45_checkpoint.json", [25, 50, 75, 100], 100, 400, events.STOPPED, [(50, 1.19), (100, 1.12)], [75]),
        ("v5_final.json", [1, 2, 3, 4, 5, 6], 6, 6, events.FINISHED, [(3, 1.2), (6, 0.91)], []),
    ],
)
def test_trainer_state_eras_give_the_loss_curve(name: str, steps: list[int], final: int, max_steps: int, end: str,
                                                 evals: list[tuple[int, float]], nan_steps: list[int]) -> None:
    state = _fold(importers.import_path(STATES / name))
    assert [s for s, _ in state.loss] == steps
    assert state.max_steps == max_steps and state.step == final and state.state == end
    assert [s for s, _ in state.eval_loss] == [s for s, _ in evals]
    for (_, got), (_, want) in zip(state.eval_loss, evals):
        assert got == pytest.approx(want, nan_ok=True)
    assert state.nan_steps == nan_steps


def test_events_start_with_a_header_and_times_increase() -> None:
    found = importers.import_path(STATES / "v5_final.json")
    assert isinstance(found[0], events.Header) and found[0].name == "trainer_state"
    times = [e.t for e in found]
    assert times == sorted(times)
    assert times[-1] - times[0] == pytest.approx(12.0)  # train_runtime spreads the steps


def test_summary_entry_is_not_a_loss_point() -> None:
    state = _fold(importers.import_path(STATES / "v4_3_early.json"))
    assert state.last_loss == pytest.approx(2.30)  # not train_loss


def test_grad_norm_kept_when_present() -> None:
    state = _fold(importers.import_path(STATES / "v4_45_checkpoint.json"))
    assert [s for s, _ in state.grad_norm] == [25, 50, 75, 100]
    assert state.batch_size == 4


def _output_dir(root: Path) -> Path:
    """checkpoint-5, -10 and -100: `checkpoint-100` sorts first by name and last by step."""
    out = root / "my-finetune"
    for step in (5, 10, 100):
        ckpt = out / f"checkpoint-{step}"
        ckpt.mkdir(parents=True)
        text = (STATES / "v4_45_checkpoint.json").read_text()
        if step != 100:  # earlier checkpoints hold a shorter history
            text = text.replace('"global_step": 100', f'"global_step": {step}')
        (ckpt / "trainer_state.json").write_text(text)
    (out / "checkpoint-notanumber").mkdir()
    return out


def test_output_dir_takes_the_latest_checkpoint_by_step(tmp_path: Path) -> None:
    found = importers.import_path(_output_dir(tmp_path))
    state = _fold(found)
    assert found[0].name == "my-finetune"  # type: ignore[union-attr]
    assert state.step == 100 and [s for s, _ in state.checkpoints] == [5, 10, 100]


def test_a_checkpoint_folder_is_named_after_its_output_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A newcomer trial imported `out/checkpoint-500` and got a run named `checkpoint-500`; its file
    trainer_state.json was already named after the output directory. Also from inside the folder (`.`)."""
    checkpoint = tmp_path / "my-qwen-lora" / "checkpoint-3"
    checkpoint.mkdir(parents=True)
    shutil.copy(STATES / "v5_final.json", checkpoint / "trainer_state.json")
    assert importers.import_path(checkpoint)[0].name == "my-qwen-lora"  # type: ignore[union-attr]
    monkeypatch.chdir(checkpoint)
    assert importers.import_path(Path("."))[0].name == "my-qwen-lora"  # type: ignore[union-attr]


def test_output_dir_prefers_top_level_state_with_the_summary(tmp_path: Path) -> None:
    out = tmp_path / "run"
    (out / "checkpoint-3").mkdir(parents=True)
    shutil.copy(STATES / "v5_final.json", out / "checkpoint-3" / "trainer_state.json")
    shutil.copy(STATES / "v5_final.json", out / "trainer_state.json")
    state = _fold(importers.import_path(out))
    assert state.state == events.FINISHED and state.step == 6


def test_stdout_log_with_progress_bars() -> None:
    state = _fold(importers.import_path(DATA / "stdout" / "tqdm_v4.log"))
    assert [s for s, _ in state.loss] == [2, 4, 6, 8, 10, 12]  # the loading bar (2/2) is not training's
    assert state.nan_steps == [6] and state.eval_loss == [(6, 2.05)]
    assert state.max_steps == 12 and state.state == events.FINISHED


def test_stdout_log_of_transformers_5_quoted_values_and_no_bars(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    lines = [f"{{'loss': '{2 - i / 10:.3g}', 'grad_norm': 'nan', 'learning_rate': '0.0002', 'epoch': '{i}'}}"
             for i in range(1, 5)]
    lines.append("{'train_runtime': '8.0', 'train_samples_per_second': '4', 'train_steps_per_second': '5'}")
    log.write_bytes("\r\n".join(lines).encode() + b"\r\n")
    state = _fold(importers.import_path(log))
    # 8 s at 5 steps/s is 40 steps over 4 epochs, logged once an epoch: every 10 steps.
    assert [s for s, _ in state.loss] == [10, 20, 30, 40]
    assert state.nan_steps == [10, 20, 30, 40]  # grad_norm nan
    assert "by each log's epoch (10 steps an epoch)" in state.notices[0].message


def test_step_less_dicts_are_placed_by_their_epoch(tmp_path: Path) -> None:
    """A log that starts mid-run (epoch 1.75; resumed, or the head cut off) of dicts with no step: line order spread
    its 6 dicts over the summary's 120 steps (20, 40 .. 120) where their epochs say 70, 80 .. 120 (40 an epoch)."""
    log = tmp_path / "train.log"
    lines = [f"{{'loss': {2 - i / 10:.2f}, 'learning_rate': 0.0002, 'epoch': {1.5 + i / 4}}}" for i in range(1, 7)]
    lines.insert(2, "{'eval_loss': 1.9, 'eval_runtime': 1.0, 'epoch': 2.0}")
    lines.append("{'train_runtime': 120.0, 'train_samples_per_second': 4, 'train_steps_per_second': 1.0, "
                 "'train_loss': 1.5, 'epoch': 3.0}")
    log.write_text("\n".join(lines) + "\n")
    state = _fold(importers.import_path(log))
    assert [s for s, _ in state.loss] == [70, 80, 90, 100, 110, 120]
    assert state.eval_loss == [(80, 1.9)] and state.max_steps == 120 and state.epoch == 3.0
    assert "steps placed by each log's epoch (40 steps an epoch)" in state.notices[0].message


def test_step_less_dicts_without_steps_per_epoch_keep_their_order_and_show_their_epoch(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("".join(f"{{'loss': {2 - i / 10:.2f}, 'epoch': {i / 4}}}\n" for i in range(1, 5)))
    found = importers.import_path(log)
    assert [(e.step, e.epoch) for e in found if isinstance(e, events.Step)] == [(1, .25), (2, .5), (3, .75), (4, 1)]
    assert "in line order, not the trainer's steps" in _fold(found).notices[0].message


@pytest.mark.parametrize("content", [b"", b"hello\nworld\n", b"\x00\xff\xfe binary", b'{"a": 1}', b"{not json"])
def test_other_files_fail_clearly(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "thing.txt"
    path.write_bytes(content)
    with pytest.raises(importers.ImportFailed, match="thing.txt"):
        importers.import_path(path)


def test_empty_directory_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(importers.ImportFailed, match="trainer_state.json"):
        importers.import_path(tmp_path)


def test_open_any_accepts_imports_and_names_them() -> None:
    found, notes, title = open_any(STATES / "v5_final.json", Path("/nonexistent"))
    assert notes == "" and "imported from v5_final.json" in title and len(found) > 10


def test_import_command_writes_a_run_directory(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    done = subprocess.run([*CLI, "import", str(STATES / "v5_final.json"),
                           "--runs-dir", str(runs), "--name", "old"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip()
    assert run_id.endswith("-old") and (runs / run_id / "recipe.toml").is_file()
    found, notes, title = open_any(run_id, runs)
    assert title == run_id and notes == ""
    assert _fold(found).loss == _fold(importers.import_path(STATES / "v5_final.json")).loss


def test_import_command_rejects_junk_with_exit_2(tmp_path: Path) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00\x01")
    done = subprocess.run([*CLI, "import", str(junk), "--runs-dir",
                           str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "junk.bin" in done.stderr


# -- issue 18: LLaMA-Factory and axolotl ----------------------------------------------------------------

def test_llamafactory_trainer_log_jsonl_is_imported(tmp_path: Path) -> None:
    """`import` used to refuse LLaMA-Factory's trainer_log.jsonl; its steps and total come from the records."""
    folder = tmp_path / "qwen-lora"
    folder.mkdir()
    path = folder / "trainer_log.jsonl"
    path.write_text("\n".join(
        f'{{"current_steps": {s}, "total_steps": 50, "loss": {2.0 - s / 100}, "eval_loss": null, "learning_rate": '
        f'1e-4, "epoch": {s / 50}, "percentage": {s * 2}, "elapsed_time": "0:00:{s:02d}"}}' for s in (10, 20, 30)))
    found = importers.import_path(path)
    state = _fold(found)
    assert [s for s, _ in state.loss] == [10, 20, 30] and state.loss[-1][1] == pytest.approx(1.7)
    assert state.max_steps == 50 and state.name == "qwen-lora" and state.state == events.STOPPED


AXOLOTL = """[2025-01-01 10:00:00,000] [INFO] [axolotl.train.train:170] [PID:1] [RANK:0] Starting trainer...
  0%|          | 0/4 [00:00<?, ?it/s]
 25%|██▌       | 1/4 [00:05<00:15,  5.10s/it]
{'loss': 1.5492, 'grad_norm': 14.31, 'learning_rate': 5.2e-07, 'memory/max_mem_active(gib)': 21.4, \
'memory/max_mem_allocated(gib)': 21.1, 'memory/device_mem_reserved(gib)': 23.0, 'epoch': 0.25}

 25%|██▌       | 1/4 [00:05<00:15,  5.10s/it]
 50%|█████     | 2/4 [00:10<00:10,  5.05s/it]{'loss': 1.4733, 'grad_norm': 12.9, 'learning_rate': 5.6e-07, \
'memory/max_mem_active(gib)': 21.4, 'epoch': 0.5}
 50%|█████     | 2/4 [00:10<00:10,  5.05s/it]
 75%|███████▌  | 3/4 [00:15<00:05,  5.03s/it]{'eval_loss': 1.41, 'eval_runtime': 2.0, 'epoch': 0.75}
100%|██████████| 4/4 [00:20<00:00,  5.02s/it]{'loss': 1.41, 'grad_norm': 9.06, 'learning_rate': 7.2e-07, 'epoch': 1.0}
100%|██████████| 4/4 [00:20<00:00,  5.02s/it]
{'train_runtime': 21.0, 'train_samples_per_second': 1.5, 'train_steps_per_second': 0.19, 'train_loss': 1.47, \
'epoch': 1.0}
"""


def test_axolotl_stdout_is_imported_fully(tmp_path: Path) -> None:
    """Every axolotl dict (memory keys with slashes and parentheses, dicts glued to the bar) becomes a log."""
    path = tmp_path / "axolotl.log"
    path.write_text(AXOLOTL)
    found = importers.import_path(path)
    state = _fold(found)
    assert [s for s, _ in state.loss] == [1, 2, 4]
    assert [s for s, _ in state.eval_loss] == [3]
    logs = [e for e in found if isinstance(e, events.Log) and "loss" in e.values]
    assert logs[0].values["memory/max_mem_active(gib)"] == 21.4
    assert state.max_steps == 4 and state.state == events.FINISHED


# -- issue 23: what people have -------------------------------------------------------------------------------

NOTEBOOKS = DATA / "notebooks"


def test_a_trainer_state_ends_at_global_step_not_at_its_last_log(tmp_path: Path) -> None:
    """logging_steps 10 and max_steps 125: the last log is at 120, the run ended at 125."""
    import json

    history = [{"step": s, "loss": 2.0 - s / 200, "learning_rate": 2e-4, "epoch": s / 125} for s in range(10, 130, 10)]
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"global_step": 125, "max_steps": 125, "log_history": history}))
    state = _fold(importers.import_path(path))
    assert state.loss[-1][0] == 120 and state.step == 125 and state.state == events.FINISHED


def test_a_notebook_with_the_trainer_table_and_train_output() -> None:
    """A saved .ipynb (unsloth's Colab layout): the HTML table Step / Training Loss, then TrainOutput."""
    state = _fold(importers.import_path(NOTEBOOKS / "unsloth_style_alpaca.ipynb"))
    assert [s for s, _ in state.loss] == list(range(6, 61, 6)) and state.loss[-1][1] == pytest.approx(1.1825)
    assert state.step == 60 and state.max_steps == 60 and state.state == events.FINISHED
    assert state.elapsed_s == pytest.approx(443.5713, rel=1e-3)  # TrainOutput's train_runtime


def test_a_loss_table_pasted_as_text(tmp_path: Path) -> None:
    """Copied from a rendered notebook: the progress line, then a tab-separated table with eval columns."""
    text = ("[2675/2675 05:50, Epoch 5/5]\nEpoch\tTraining Loss\tValidation Loss\tMatthews Correlation\n"
            "1\t0.530500\t0.514990\t0.432712\n2\t0.351000\t0.505386\t0.491490\n3\tNo log\t0.662538\t0.495476\n")
    path = tmp_path / "pasted.txt"
    path.write_text(text)
    state = _fold(importers.import_path(path))
    assert state.loss == [(535, 0.5305), (1070, 0.351)]  # epochs at 535 steps each (2675 / 5)
    assert [s for s, _ in state.eval_loss] == [535, 1070, 1605] and state.max_steps == 2675


def test_a_notebook_without_training_output_says_so(tmp_path: Path) -> None:
    path = tmp_path / "empty.ipynb"
    path.write_text('{"cells": [{"cell_type": "code", "outputs": [], "source": ["trainer.train()"]}], '
                    '"metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    with pytest.raises(importers.ImportFailed, match="notebook whose outputs hold no training log"):
        importers.import_path(path)


def test_grpo_columns_of_a_notebook_table_keep_their_own_metrics(tmp_path: Path) -> None:
    """TRL/unsloth GRPO tables add train columns (reward, reward_std, kl): kept under their own names, and the
    advisor judges the run by them, not by a loss near zero."""
    from loratui.logic.advisor import Advisor

    text = "Step\tTraining Loss\treward\treward_std\tcompletion_length\tkl\n" + "".join(
        f"{i}\t{0.0 if i < 4 else 0.0001 * i}\t{0.1 * i}\t{0.3}\t180.5\t{0.0001 * i}\n" for i in range(1, 13))
    path = tmp_path / "grpo.txt"
    path.write_text(text)
    found = importers.import_path(path)
    logs = [e for e in found if isinstance(e, events.Log)]
    assert {"loss", "reward", "reward_std", "kl", "completion_length"} <= set(logs[0].values)
    assert Advisor(None).feed_all(found).items() == []


def test_a_notebook_exported_to_markdown_keeps_its_html_table(tmp_path: Path) -> None:
    """nbconvert's Markdown keeps the Trainer's output HTML as it was drawn."""
    text = ("    <div>\n      <progress value='2675' max='2675' style='width:300px; height:20px;'></progress>\n"
            "      [2675/2675 05:50, Epoch 5/5]\n    </div>\n    <table border=\"1\" class=\"dataframe\">\n"
            "  <thead>\n    <tr style=\"text-align: left;\">\n      <th>Epoch</th>\n      <th>Training Loss</th>\n"
            "      <th>Validation Loss</th>\n    </tr>\n  </thead>\n  <tbody>\n"
            "    <tr>\n      <td>1</td>\n      <td>0.530500</td>\n      <td>0.514990</td>\n    </tr>\n"
            "    <tr>\n      <td>2</td>\n      <td>0.351000</td>\n      <td>0.505386</td>\n    </tr>\n"
            "  </tbody>\n</table>\n")
    path = tmp_path / "notebook.md"
    path.write_text(text)
    state = _fold(importers.import_path(path))
    assert state.loss == [(535, 0.5305), (1070, 0.351)] and [s for s, _ in state.eval_loss] == [535, 1070]


def test_a_real_trainer_state_ends_at_its_global_step() -> None:
    """Logged every 10 steps to step 200, trained to 201 (max_steps 201): finished at 201, not stopped at 200.
    Source: https://github.com/DMalakhov1/PROJECT_LORA/blob/fa8393c412a7fd17e79ae5a00cd844a595dcac34/trainer_state.json
    (byte for byte). A healthy LoRA run: the advisor finds nothing in it."""
    from loratui.logic.advisor import Advisor

    found = importers.import_path(STATES / "real_lora_global_step_201.json")
    state = _fold(found)
    assert state.loss[-1] == (200, 1.2845) and state.step == 201 and state.state == events.FINISHED
    assert Advisor(None).feed_all(found).items() == []


@pytest.mark.parametrize("text", ["Step\tTraining Loss\n1e400\t2\n-5\tnan\n", "Step\tTraining Loss\nnan\t2.0\n"])
def test_a_table_with_steps_no_run_has_is_refused_in_words(text: str, tmp_path: Path) -> None:
    path = tmp_path / "table.txt"
    path.write_text(text)
    with pytest.raises(importers.ImportFailed, match="none of"):
        importers.import_path(path)


def test_a_record_without_times_gives_no_duration_pace_or_eta() -> None:
    """A trainer_state.json saved with a checkpoint (no train_runtime: a real tiny run's checkpoint-40) got
    steps a second apart, and `replay --summary` said "duration_s": 40.0, `report` "duration 40s", the status
    bar "elapsed 40s" and, mid-replay, an ETA: numbers nobody measured. A record with train_runtime keeps its
    duration (v5_final.json: 12 s)."""
    from loratui.logic.summary import summarize

    bare = importers.import_path(STATES / "v4_45_checkpoint.json")
    state = _fold(bare)
    assert state.elapsed_s is None and state.seconds_per_step is None
    assert summarize(state, "")["duration_s"] is None
    midway = _fold([e for e in bare if not isinstance(e, events.End)][: len(bare) // 2])
    assert midway.state == events.TRAINING and midway.eta_s is None
    timed = _fold(importers.import_path(STATES / "v5_final.json"))
    assert summarize(timed, "")["duration_s"] == pytest.approx(12.0)
