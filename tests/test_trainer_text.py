"""The one reader of training text (logic.text_reader) and the traceback scanner (logic.tracebacks)."""

from __future__ import annotations

import math

import pytest

from loratui import events
from loratui.logic import tracebacks
from loratui.logic.text_reader import TextReader, printed_dict


def read(text: str) -> list[events.AnyEvent]:
    reader = TextReader()
    found: list[events.AnyEvent] = []
    for line in text.split("\n"):
        found += reader.feed(line)
    return found + reader.close()


def logs(text: str) -> list[tuple[int, dict[str, float | None]]]:
    return [(e.step, {k: events.num_in(v) for k, v in e.values.items()}) for e in read(text)
            if isinstance(e, events.Log)]


def test_printed_dict_takes_nan_inf_and_strings() -> None:
    numbers, texts = printed_dict("{'loss': 0.0, 'grad_norm': nan, 'a': inf, 'b': -inf, 'c': '1.25', "
                                  "'global_step/max_steps': '5/2169', 'elapsed_time': '1m 22s'}")
    assert numbers["loss"] == 0.0 and math.isnan(numbers["grad_norm"])
    assert numbers["a"] == math.inf and numbers["b"] == -math.inf and numbers["c"] == 1.25
    assert texts["global_step/max_steps"] == "5/2169" and "elapsed_time" in texts


def test_printed_dict_keys_with_spaces_slashes_parentheses() -> None:
    numbers, _ = printed_dict("{'loss': 1.5, 'memory/max_mem_active(gib)': 12.3, 'train_speed(iter/s)': 0.007, "
                              "'rewards/chosen mean': -0.5}")
    assert numbers == {"loss": 1.5, "memory/max_mem_active(gib)": 12.3, "train_speed(iter/s)": 0.007,
                       "rewards/chosen mean": -0.5}


def test_a_nan_dict_is_a_log_not_dropped() -> None:
    """Issue 18's first failure: the dict parser rejected `nan`, so the line was dropped."""
    found = logs("{'loss': 1.62, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.0}\n"
                 "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 2e-05, 'epoch': 0.01}")
    assert [step for step, _ in found] == [1, 2]
    assert all(math.isnan(values["grad_norm"] or 0.0) for _, values in found)


def test_dict_glued_to_a_bar_and_carriage_return_redraws() -> None:
    text = ("  0%|          | 0/50 [00:00<?, ?it/s]\r  2%|▏         | 1/50 [00:01<01:00,  1.2s/it]"
            "\r  4%|▍         | 2/50 [00:02<00:58,  1.2s/it]{'loss': 2.5, 'learning_rate': 1e-4, 'epoch': 0.04}\n"
            "\r  4%|▍         | 2/50 [00:02<00:58,  1.2s/it]\r  6%|▌         | 3/50 [00:03<00:57,  1.2s/it]")
    found = read(text)
    assert [(e.step, e.values["loss"]) for e in found if isinstance(e, events.Log)] == [(2, 2.5)]
    assert [e.step for e in found if isinstance(e, events.Step)] == [1, 2, 3]
    assert next(e for e in found if isinstance(e, events.Step)).step_time == pytest.approx(1.2)


def test_a_dict_takes_the_step_of_the_bar_redrawn_after_it() -> None:
    text = "\n".join(["  1%|          | 9/900 [00:09<15:00,  1.01s/it]",
                      "{'loss': 1.9, 'grad_norm': 0.5, 'learning_rate': 1e-4, 'epoch': 0.01}",
                      "  1%|          | 10/900 [00:10<15:00,  1.01s/it]",
                      "{'eval_loss': 1.7, 'eval_runtime': 3.0, 'epoch': 0.01}"])
    assert logs(text) == [(10, {"loss": 1.9, "grad_norm": 0.5, "learning_rate": 1e-4, "epoch": 0.01}),
                          (10, {"eval_loss": 1.7, "eval_runtime": 3.0, "epoch": 0.01})]


def test_loading_bars_are_not_the_training_bar() -> None:
    text = "\n".join(["Loading checkpoint shards: 100%|██████████| 4/4 [00:05<00:00,  1.3s/it]",
                      "Map: 100%|██████████| 1000/1000 [00:01<00:00, 900 examples/s]",
                      "  0%|          | 1/30 [00:01<00:30,  1.0s/it]",
                      "{'loss': 1.0, 'learning_rate': 1e-4, 'epoch': 0.03}",
                      "  3%|▎         | 1/30 [00:01<00:30,  1.0s/it]"])
    reader = TextReader()
    for line in text.split("\n"):
        reader.feed(line)
    reader.close()
    assert reader.bar_total == 30


def test_llamafactory_trainer_log_jsonl() -> None:
    text = "\n".join([
        '{"current_steps": 10, "total_steps": 100, "loss": 2.4977, "eval_loss": null, "learning_rate": 5e-07, '
        '"epoch": 0.1, "percentage": 10.0, "elapsed_time": "0:00:24", "remaining_time": "0:03:33"}',
        '{"current_steps": 20, "total_steps": 100, "loss": NaN, "learning_rate": 1e-06, "epoch": 0.2}',
        '{"current_steps": 100, "total_steps": 100, "loss": null, "learning_rate": null, "epoch": 1.0}'])
    found = logs(text)
    assert [step for step, _ in found] == [10, 20]
    assert found[0][1] == {"loss": 2.4977, "learning_rate": 5e-07, "epoch": 0.1}
    assert math.isnan(found[1][1]["loss"] or 0.0)


def test_llamafactory_running_log_and_a_logger_duplicate() -> None:
    """LLaMA-Factory's callback logs each dict through a logger too: one log, the fuller values kept."""
    text = "\n".join([
        "03/12/2024 11:24:33 - INFO - llmtuner.extras.callbacks - {'loss': 0.0000, 'learning_rate': 4.9999e-02, "
        "'epoch': 0.01}",
        "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 0.04999871292419044, 'epoch': 0.01}",
        "[INFO|2024-11-26 22:09:01] logging.py:157 >> {'loss': 2.2818, 'learning_rate': 2.5000e-06, 'epoch': 0.29}"])
    found = logs(text)
    assert len(found) == 2
    assert math.isnan(found[0][1]["grad_norm"] or 0.0) and found[1][1]["loss"] == 2.2818


@pytest.mark.parametrize(("line", "step", "loss"), [
    ("INFO:tensorflow:global step 435: loss = 0.0630 (0.408 sec/step)", 435, 0.0630),
    ("step=220  loss=1.43   gnorm=7.7    ← BEST", 220, 1.43),
    ("10/30 22:19:57 - mmengine - INFO - Epoch(train) [1][240/735]  lr: 1.9813e-04  eta: 2:44:49  time: 2.8874  "
     "loss: 2.5128  grad_norm: nan", 240, 2.5128),
    ("Train: data epoch: [0]  [3950/5000]  eta: 0:08:37  lr: 0.000029  loss: 10.3750  time: 0.4920", 3950, 10.375),
    ("    1 93.44 s run, 11.8750 loss, 0.000000000001 LR, 642.43 GB used", 1, 11.875),
    ("2018-03-23 15:40:22,720:INFO: train loss:nan", 1, math.nan),
])
def test_step_and_loss_lines(line: str, step: int, loss: float) -> None:
    (found,) = logs(line)
    assert found[0] == step
    got = found[1]["loss"]
    assert got == pytest.approx(loss, nan_ok=True)


def test_code_is_not_a_loss_line() -> None:
    assert logs("    loss = 0.5 * (a + b)\n    loss = model_engine.train_batch().item()") == []


def test_lightning_postfix_one_log_per_step_across_epochs() -> None:
    text = "\n".join([
        "Epoch 0:  50%|█████     | 1/2 [00:08<00:08,  8.77s/it, loss=10.473, v_num=1]",
        "Epoch 0: 100%|██████████| 2/2 [00:11<00:00,  5.82s/it, loss=10.47, v_num=1]",
        "Epoch 0: 100%|██████████| 2/2 [00:11<00:00,  5.82s/it, loss=10.22, v_num=1]",
        "Epoch 1:  50%|█████     | 1/2 [00:03<00:03,  3.00s/it, loss=10.1, v_num=1]"])
    assert [(step, values["loss"]) for step, values in logs(text)] == [(1, 10.473), (2, 10.22), (3, 10.1)]


def test_incremental_equals_whole_and_state_stays_bounded() -> None:
    """Fed one line at a time (a watched command), the reader keeps no history."""
    line = "{{'loss': {loss}, 'learning_rate': 1e-4}}\n  5%|▌         | {n}/100000 [00:10<15:00,  1.01s/it]"
    text = "\n".join(line.format(n=n, loss=2.0 - n / 1e5) for n in range(1, 3001))
    reader = TextReader()
    count = 0
    for piece in text.split("\n"):
        count += sum(isinstance(e, events.Log) for e in reader.feed(piece))
    count += sum(isinstance(e, events.Log) for e in reader.close())
    assert count == 3000 and len(reader._waiting) == 0 and reader.step == 3000


def test_ansi_colours_are_stripped() -> None:
    assert logs("\x1b[32m{'loss': 1.25, 'learning_rate': 0.0001}\x1b[0m") == [(1, {"loss": 1.25, "learning_rate": 1e-4})]


# -- tracebacks -------------------------------------------------------------------------------------------

SAVE = '''Traceback (most recent call last):
  File "/home/u/train.py", line 40, in <module>
    trainer.train()
  File "/venv/lib/python3.11/site-packages/transformers/trainer.py", line 2311, in _inner_training_loop
    self._maybe_log_save_evaluate(tr_loss, grad_norm, model, trial, epoch)
  File "/venv/lib/python3.11/site-packages/transformers/trainer.py", line 2740, in _save_checkpoint
    self.save_model(output_dir, _internal_call=True)
  File "/venv/lib/python3.11/site-packages/safetensors/torch.py", line 286, in save_file
    serialize_file(_flatten(tensors), filename, metadata=metadata)
RuntimeError: something'''


@pytest.mark.parametrize(("frames", "phase"), [
    (["_inner_training_loop", "training_step", "backward"], "train"),
    (["_inner_training_loop", "_maybe_log_save_evaluate", "evaluate", "evaluation_loop", "nested_concat"], "eval"),
    (["train", "_inner_training_loop", "_save_checkpoint", "save_model", "save_pretrained"], "save"),
    (["train", "_inner_training_loop", "__next__", "_next_data", "fetch", "__getitem__"], "data"),
    (["main", "from_pretrained", "_load_pretrained_model"], "load"),
    (["evaluation_loop", "prediction_step", "compute_loss"], "eval"),
    (["<module>", "torch_pad_and_concatenate"], "eval"),  # nested_concat's helper, seen alone in a notebook
    (["main", "helper"], ""),
])
def test_phase_from_frames(frames: list[str], phase: str) -> None:
    assert tracebacks.phase_of(tuple(tracebacks.Frame("/x.py", f) for f in frames)) == phase


def test_scanner_reads_the_exception_where_and_phase() -> None:
    scanner = tracebacks.TraceScanner()
    for line in SAVE.splitlines():
        scanner.line(line)
    raised = scanner.chosen
    assert raised is not None and raised.type == "RuntimeError" and raised.message == "something"
    assert raised.phase == "save" and raised.where == "library:safetensors"
    assert raised.user_frame is not None and raised.user_frame.path == "/home/u/train.py"


def test_scanner_joins_a_message_continued_on_the_next_lines_and_rank_prefixes() -> None:
    scanner = tracebacks.TraceScanner()
    for line in ["[rank1]: Traceback (most recent call last):",
                 '[rank1]:   File "/src/loratui/trainer/build.py", line 9, in build', "[rank1]:     x()",
                 "[rank1]: ImportError: ", "[rank1]: AlbertTokenizer requires the SentencePiece library but it was "
                 "not found in your environment.", ""]:
        scanner.line(line)
    raised = scanner.chosen
    assert raised is not None and raised.where == "loratui"
    assert raised.message.startswith("AlbertTokenizer requires the SentencePiece library")


def test_a_cut_traceback_is_seen() -> None:
    scanner = tracebacks.TraceScanner()
    for line in SAVE.splitlines()[:-1]:
        scanner.line(line)
    assert scanner.chosen is None and scanner.cut and scanner.phase == "save"


def test_older_ipython_and_colab_frames_are_frames() -> None:
    """`path.py in func(...)` (IPython before 8) and Colab's `[path.py](link) in func(...)`: the frames that
    say an OOM struck in evaluation, under a notebook header that names the exception first."""
    scanner = tracebacks.TraceScanner()
    for line in ["OutOfMemoryError                          Traceback (most recent call last)",
                 "<ipython-input-3-0f1e> in <cell line: 1>()", "----> 1 trainer.predict(test)", "",
                 "/usr/lib/python3.10/dist-packages/transformers/trainer.py in evaluation_loop(self, dataloader)",
                 "[/usr/lib/python3.10/dist-packages/transformers/trainer_pt_utils.py](https://localhost:8080/#) in "
                 "torch_pad_and_concatenate(tensor1, tensor2, padding_index)", "---> 88     result = x"]:
        scanner.line(line)
    assert [f.func for f in scanner.frames] == ["<cell line: 1>", "evaluation_loop", "torch_pad_and_concatenate"]
    assert scanner.frames[0].call == "predict"  # the cell's arrow line
    assert scanner.frames[-1].path.endswith("transformers/trainer_pt_utils.py") and scanner.phase == "eval"
    assert scanner.pending_type == "OutOfMemoryError" and scanner.cut


def test_prose_and_warnings_are_not_exceptions() -> None:
    scanner = tracebacks.TraceScanner()
    for line in ["UserWarning: this is deprecated", "raise ValueError(", "I think the ValueError is odd",
                 "  warnings.warn("]:
        scanner.line(line)
    assert scanner.chosen is None


@pytest.mark.parametrize(("path", "where"), [
    # a venv made inside a clone named loratui (README: clone, `python3 -m venv .venv`): torch is torch
    ("/tmp/nc/loratui/.venv/lib/python3.11/site-packages/torch/nn/functional.py", "library:torch"),
    ("/tmp/nc/loratui/train.py", "user:train.py"),  # the newcomer's script beside the clone's README
    ("/home/u/loratui/loratui/trainer/build.py", "loratui"),  # a clone or an editable install
    ("/src/loratui/cli.py", "loratui"),
    ("/opt/venv/lib/python3.11/site-packages/loratui/trainer/callback.py", "loratui"),
    ("/usr/lib/python3.11/threading.py", "python"),
])
def test_whose_frame_a_path_is(path: str, where: str) -> None:
    """A traceback from a plain script run with a venv inside the clone read every torch frame as loratui's:
    `doctor` said "raised in loratui's own code: a bug; please report it" of an IndexError in the user's data."""
    assert tracebacks.origin(path) == where
