"""`loratui doctor`: pasted logs and tracebacks, run directories, JSON output, and bad paths."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loratui import events
from loratui.cli import main

LOGS = Path(__file__).parent / "data" / "logs"
REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("name", "ids"), [
    ("oom_old_rtx3090_24gb.txt", ["oom_full"]),
    ("oom_old_v100_32gb_seed.txt", ["oom_full"]),
    ("oom_new_rtx5090_32gb_full.txt", ["oom_full"]),
    ("oom_new_a100_40gb_other_process.txt", ["oom_other_process"]),
    ("oom_new_h100_80gb_fragmentation.txt", ["oom_fragmentation"]),
    ("oom_multirank_h100.txt", ["oom_full"]),
    ("oom_eval_a100_40gb.txt", ["oom_at_eval"]),
    ("oom_plain_cuda_error.txt", ["oom_full"]),
    ("oom_junk_values.txt", ["oom_full"]),
    ("cuda_illegal_memory_access.txt", ["cuda_error"]),
    ("nccl_timeout_2rank.txt", ["nccl_timeout"]),
    ("cuda_device_assert.txt", ["cuda_error"]),
    ("bnb_without_gpu.txt", ["bnb_setup"]),
    ("bnb_cuda_setup_failed.txt", ["bnb_setup"]),
    ("flash_attn_missing.txt", ["flash_attn_unavailable"]),
    ("nan_paged_adamw.txt", ["nan_loss"]),
    ("healthy_tiny_stdout.txt", []),
    ("healthy_tiny_stderr.txt", []),
])
def test_text_logs(name: str, ids: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """The rules' items, whole and in order; a guess (the word model's or the arbiter's, a warning that says it is
    one) may come before them: on oom_plain_cuda_error.txt, a bare "CUDA error: out of memory" whose kind is the
    default "full" (no numbers), the arbiter guesses another process first."""
    code = main(["doctor", str(LOGS / name), "--json"])
    items = json.loads(capsys.readouterr().out)
    assert code == (1 if any(item["severity"] == "error" for item in items) else 0)
    guessed = items[:1] if items and "(a guess" in items[0]["title"] else []
    assert [item["id"] for item in items[len(guessed):]] == ids
    assert all(item["severity"] == "warning" for item in guessed)
    for item in items:
        assert set(item) == {"id", "severity", "title", "evidence", "change", "step"}


@pytest.mark.parametrize(("name", "expected"), [
    ("oom_junk_values.txt", "no usable numbers"),
    ("oom_multirank_h100.txt", "rank 1"),
    ("oom_new_a100_40gb_other_process.txt", "PID 2918771"),
    ("nan_paged_adamw.txt", "step 4"),
])
def test_text_output_mentions(name: str, expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", str(LOGS / name)]) == 1  # each prints an ERROR
    assert expected in capsys.readouterr().out


def test_healthy_text_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", str(LOGS / "healthy_tiny_stdout.txt")]) == 0
    assert "no problems found" in capsys.readouterr().out


@pytest.mark.parametrize("path", ["/no/such/file.log", "no-such-run-id"])
def test_missing_path_exits_2(path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", path, "--runs-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert path in err and len(err.strip().splitlines()) == 1


def test_directory_without_log_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", str(tmp_path)]) == 2
    assert "events.jsonl" in capsys.readouterr().err


def _write_run(run_dir: Path, found: list[events.AnyEvent], recipe_text: str) -> None:
    run_dir.mkdir()
    (run_dir / "recipe.toml").write_text(recipe_text)
    (run_dir / "events.jsonl").write_bytes(b"".join(events.encode(e) for e in found) + b'{"torn')


RECIPE = """
[model]
path = ""
[training]
per_device_train_batch_size = 4
gradient_accumulation_steps = 2
[data]
path = "train.jsonl"
"""


def test_run_directory_uses_its_recipe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A recorded OOM in a run directory gets moves from its recipe copy (even one needing --model-path)."""
    found: list[events.AnyEvent] = [
        events.Header(t=0, schema=1, run_id="r", recipe_hash="h"),
        events.TrainBegin(t=1, max_steps=10, num_epochs=1.0),
        events.Step(t=2, step=1, epoch=0.1, step_time=1.0),
        events.Output(t=3, stream="stderr", lines=[(LOGS / "oom_old_rtx3090_24gb.txt").read_text().splitlines()[-1]]),
        events.End(t=4, state="failed", exit_code=1),
    ]
    _write_run(tmp_path / "run1", found, RECIPE)
    assert main(["doctor", str(tmp_path / "run1"), "--json"]) == 1
    (item,) = json.loads(capsys.readouterr().out)
    assert item["id"] == "oom_full" and item["step"] == 1
    assert item["change"] == {"training.per_device_train_batch_size": 2, "training.gradient_accumulation_steps": 4}
    assert main(["doctor", "run1", "--runs-dir", str(tmp_path)]) == 1
    assert "per_device_train_batch_size = 2" in capsys.readouterr().out
    assert main(["doctor", str(tmp_path / "run1" / "events.jsonl"), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)[0]["change"] == item["change"]


@pytest.mark.slow
def test_real_tiny_run_is_healthy(healthy_tiny_run: Path) -> None:
    """The doctor finds nothing wrong with a real tiny CPU run, run through the console script's module."""
    run_dir = healthy_tiny_run
    script = shutil.which("loratui") or ""
    command = [script] if script else [sys.executable, "-c", "import sys; from loratui.cli import main; "
                                                             "sys.exit(main())"]
    done = subprocess.run(command + ["doctor", str(run_dir), "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


# -- issue 18: the world's logs -------------------------------------------------------------------------

def _doctor_text(tmp_path: Path, text: str | bytes, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[dict]]:
    path = tmp_path / "pasted.txt"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    code = main(["doctor", str(path), "--json"])
    return code, json.loads(capsys.readouterr().out)


NAN_DICTS = """{'loss': 1.968, 'grad_norm': nan, 'learning_rate': 7.1e-09, 'epoch': 0.0}
{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 7.1e-08, 'epoch': 0.0}
{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 1.4e-07, 'epoch': 0.0}
"""
EVAL_OOM = """Traceback (most recent call last):
  File "run.py", line 699, in main
    metrics = trainer.evaluate()
  File "/venv/lib/python3.10/site-packages/transformers/trainer.py", line 4031, in evaluation_loop
    all_preds.add(logits)
  File "/venv/lib/python3.10/site-packages/transformers/trainer_pt_utils.py", line 97, in nested_concat
    return torch.cat((tensor1, tensor2), dim=0)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.10 GiB. GPU 0 has a total capacity of 39.38 GiB of \
which 1.02 GiB is free. Including non-PyTorch memory, this process has 38.35 GiB memory in use. Of the allocated \
memory 36.90 GiB is allocated by PyTorch, and 0.95 GiB is reserved by PyTorch but unallocated.
"""
SAVE_OOM = """Saving model checkpoint to out/checkpoint-500
Traceback (most recent call last):
  File "/venv/lib/python3.10/site-packages/transformers/trainer.py", line 3084, in _save_checkpoint
    self.save_model(output_dir, _internal_call=True)
  File "/venv/lib/python3.10/site-packages/safetensors/torch.py", line 286, in save_file
    serialize_file(_flatten(tensors), filename, metadata=metadata)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 500.00 MiB. GPU 0 has a total capacity of 23.65 GiB \
of which 90.00 MiB is free. Including non-PyTorch memory, this process has 23.55 GiB memory in use. Of the allocated \
memory 22.90 GiB is allocated by PyTorch, and 200.00 MiB is reserved by PyTorch but unallocated.
"""
WORKERS = ("/venv/lib/python3.10/site-packages/lightning/pytorch/trainer/connectors/data_connector.py:441: The "
           "'train_dataloader' does not have many workers which may be a bottleneck. Consider increasing the value "
           "of the `num_workers` argument` to `num_workers=15` in the `DataLoader` to improve performance.\n")
TOKENIZER = """Traceback (most recent call last):
  File "/home/me/train.py", line 12, in <module>
    tokenizer = AutoTokenizer.from_pretrained("albert-base-v2")
  File "/venv/lib/python3.10/site-packages/transformers/models/auto/tokenization_auto.py", line 862, in from_pretrained
    return tokenizer_class.from_pretrained(pretrained_model_name_or_path, *inputs, **kwargs)
ValueError: Couldn't instantiate the backend tokenizer from one of: (1) a `tokenizers` library serialization file, \
(2) a slow tokenizer instance to convert or (3) an equivalent slow tokenizer class to instantiate and convert. You \
need to have sentencepiece installed to convert a slow tokenizer to a fast one.
"""


@pytest.mark.parametrize(("text", "first", "mentions"), [
    (NAN_DICTS, "nan_loss", "grad_norm"),
    (EVAL_OOM, "oom_at_eval", "eval_accumulation_steps"),
    (SAVE_OOM, "oom_at_save", "save"),
    (WORKERS, "data_starved", "num_workers=15"),
    ("\n".join(f"{{'loss': {v}, 'learning_rate': 2e-4, 'epoch': {i / 100}}}" for i, v in
               enumerate([1.62, 1.59, 0.0, 0.0, 0.0])), "loss_zero", "collapsed to 0"),
    ("\n".join(f"{{'loss': {v}, 'learning_rate': 2e-4}}" for v in [2.0, 1.5, 1.2, 1.1, 1.0, 2.2, 3.5, 4.8]),
     "loss_diverging", "rising"),
    ("\n".join(f"Train: [{i}/100] loss: 10.3750 lr: 0.00003" for i in range(10)), "loss_flat", "10.375"),
    (TOKENIZER, "exception", "pip install sentencepiece"),
    ("ModuleNotFoundError: No module named 'peft'\n", "exception", "pip install peft"),
])
def test_issue_18_failures_get_the_right_first_item(text: str, first: str, mentions: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The five failures at the top of issue 18, each as a user would paste it."""
    code, items = _doctor_text(tmp_path, text, capsys)
    assert items and items[0]["id"] == first, [(i["id"], i["title"]) for i in items]
    assert mentions in json.dumps(items[0])
    assert code == (1 if items[0]["severity"] == "error" else 0)


def test_loss_collapse_is_not_called_zero_from_the_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 16 item 7: first losses 1.62, 1.59, 0, 0, 0 are a collapse, and the evidence quotes the input."""
    text = "\n".join(f"{{'loss': {v}, 'learning_rate': 2e-4}}" for v in [1.62, 1.59, 0.0, 0.0, 0.0])
    _, items = _doctor_text(tmp_path, text, capsys)
    dumped = json.dumps(items)
    assert "from the start" not in dumped and "from the first logs" not in dumped
    assert "{'loss': 0.0, 'learning_rate': 2e-4}" in items[0]["evidence"]


def test_imported_run_quotes_no_invented_settings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 16 item 7: an imported log has no recipe, so no `optim = adamw_torch` in its evidence."""
    log = tmp_path / "train.log"
    log.write_text("\n".join(f"{{'loss': {v}, 'grad_norm': {g}, 'learning_rate': 2e-4}}"
                             for v, g in [(1.5, 1.0), (1.4, "nan"), (1.3, "nan")]))
    assert main(["import", str(log), "--runs-dir", str(tmp_path / "runs")]) == 0
    run_id = capsys.readouterr().out.strip()
    assert main(["doctor", run_id, "--runs-dir", str(tmp_path / "runs"), "--json"]) == 1
    items = json.loads(capsys.readouterr().out)
    assert items[0]["id"] == "nan_loss"
    for invented in ("optim =", "gradient_checkpointing =", "fp32", "adamw_torch"):
        assert invented not in json.dumps(items)


@pytest.mark.parametrize(("line", "command"), [
    ("ModuleNotFoundError: No module named 'bitsandbytes'", "pip install -U bitsandbytes"),
    ("ModuleNotFoundError: No module named 'bitsandbytes.cuda_setup.paths'", "--force-reinstall"),
])
def test_missing_bitsandbytes_gets_the_install_command(line: str, command: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 16 item 8: a missing package gets its install command, not `python -m bitsandbytes`."""
    code, items = _doctor_text(tmp_path, line + "\n", capsys)
    assert code == 1 and items[0]["id"] == "bnb_setup"
    assert command in items[0]["title"] and "python -m bitsandbytes" not in items[0]["title"]


def test_recorded_failed_run_always_has_an_item(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A loratui run that ended failed on a plain exception gets a diagnosis, in doctor and from the Advisor."""
    from loratui.logic.advisor import Advisor

    error = TOKENIZER.replace('"/home/me/train.py"', '"/src/loratui/trainer/build.py"')
    found: list[events.AnyEvent] = [
        events.Header(t=0, schema=1, run_id="r", recipe_hash="h"),
        events.State(t=1, state="loading"),
        events.End(t=2, state="failed", exit_code=1, error=error),
    ]
    advice = Advisor(None).feed_all(found).items()
    assert advice and advice[0].id == "exception" and "sentencepiece" in advice[0].title
    _write_run(tmp_path / "run1", found, RECIPE)
    assert main(["doctor", str(tmp_path / "run1"), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)[0]["id"] == "exception"
    bare = [events.Header(t=0, schema=1, run_id="r", recipe_hash="h"), events.End(t=2, state="failed", signal="SIGKILL")]
    (item,) = Advisor(None).feed_all(bare).items()
    assert item.id == "exception" and "SIGKILL" in item.title


def test_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 16 item 13: `doctor -` reads a pasted log from standard input."""
    import io
    import sys as sys_

    monkeypatch.setattr(sys_, "stdin", io.TextIOWrapper(io.BytesIO(SAVE_OOM.encode())))
    assert main(["doctor", "-", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)[0]["id"] == "oom_at_save"


@pytest.mark.parametrize(("data", "code"), [
    (b"", 2),  # bad input, said so: "no problems found" in nothing misled
    (b"\x00\x01\x02\xff" * 1000, 2),
    ("caf\xe9 latin-1 line\n".encode("latin-1") + "{'loss': 1.0, 'grad_norm': nan}\n".encode() + "日本語\n".encode("gbk"), 1),
    ("{'loss': nan, 'learning_rate': 1e-4}\n".encode("utf-16"), 1),
    (b"x" * (3 << 20), 0),
])
def test_any_input_gets_an_answer_not_a_traceback(data: bytes, code: int, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "input.log"
    path.write_bytes(data)
    assert main(["doctor", str(path)]) == code
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    if code == 2:
        assert ("binary" in err or "empty" in err) and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_100_mb_log_is_streamed_in_bounded_memory(tmp_path: Path) -> None:
    """A 100 MB log is read line by line: the process's peak memory stays far below the file's size."""
    path = tmp_path / "big.log"
    noise = "x" * 200
    block = "".join(f"  5%|▌    | {i}/100000 [00:10<15:00,  1.01s/it]\n{{'loss': {1.5 + (i % 7) / 100}, "
                    f"'learning_rate': 1e-4, 'epoch': 0.5}}\nordinary output line {i} {noise}\n" for i in range(1000))
    with open(path, "w") as handle:
        while handle.tell() < 100 << 20:
            handle.write(block)
    # VmHWM, not getrusage's ru_maxrss: Linux carries the maxrss of the forking process (pytest, hundreds of
    # MB late in a full suite) across exec into the child's figure; VmHWM belongs to the child's own memory map.
    code = ("import re, sys; from pathlib import Path; from loratui.commands.doctor import diagnose; "
            "items, note = diagnose(Path(sys.argv[1])); "
            "hwm = re.search(r'VmHWM:\\s+(\\d+)', Path('/proc/self/status').read_text()).group(1); "
            "print(hwm, len(items), note)")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr
    peak_kib, _, note = done.stdout.split(" ", 2)
    assert int(peak_kib) < 150 * 1024, peak_kib  # reading it whole would take several times the file's size
    assert "lines read" in note


def test_quoted_input_reaches_the_terminal_inert(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Evidence quotes the input; an escape sequence in it (retitle, clear screen) must not reach the terminal."""
    path = tmp_path / "hostile.log"
    path.write_bytes(b"\x1b]0;pwned\x07\x1b[2JModuleNotFoundError: No module named 'peft'\x08\n")
    assert main(["doctor", str(path)]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\x08" not in out and "pip install peft" in out


def test_a_name_that_fits_two_runs_is_refused_with_both_as_attach_does(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # Issue 26 item 9: doctor said "no such file" where attach and replay list the runs the name fits.
    for run_id in ("20261203-101010-tiny", "20261203-111111-tiny"):
        (tmp_path / run_id).mkdir()
        (tmp_path / run_id / "events.jsonl").write_text("")
    assert main(["doctor", "tiny", "--runs-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "fits 2 runs" in err and "20261203-101010-tiny" in err and "20261203-111111-tiny" in err


@pytest.mark.parametrize("text", [
    # printed dicts: the reader hands a dict on only when the next line came
    "{'loss': 1.8412, 'grad_norm': 2.113, 'learning_rate': 0.0002, 'epoch': 0.01}\n"
    "{'loss': 1.7021, 'grad_norm': 1.877, 'learning_rate': 0.0002, 'epoch': 0.02}\n"
    "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 0.0002, 'epoch': 0.03}\n"
    "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 0.0002, 'epoch': 0.04}\n",
    # a Lightning bar's postfix
    "Epoch 0:  43%|████▎     | 43/100 [00:10<00:13,  4.30it/s, loss=2.31, v_num=1]\n"
    "Epoch 0:  44%|████▍     | 44/100 [00:10<00:13,  4.30it/s, loss=nan, v_num=1]\n"
    "Epoch 0:  45%|████▌     | 45/100 [00:10<00:12,  4.30it/s, loss=nan, v_num=1]\n",
])
def test_nan_evidence_quotes_the_first_nan_line(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 26 item 4: the evidence is the line of the first NaN, not the one after it."""
    _, items = _doctor_text(tmp_path, text, capsys)
    first_nan = next(line for line in text.splitlines() if "nan" in line)
    assert items[0]["id"] == "nan_loss" and first_nan in items[0]["evidence"]
    assert [i["id"] for i in items] == ["nan_loss"]  # 0.0 beside a nan grad_norm is no collapse to zero


def test_a_notebook_is_read_through_its_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A saved .ipynb: the OOM in a cell's error output (ANSI-coloured traceback lines, as Jupyter keeps them)
    is found, and the Trainer's loss table is read as the run's logs (issue 23: Jupyter/Colab output)."""
    table = ("<div>[12/60 01:10 < 04:40, 0.17 it/s, Epoch 0.01/1]</div><table border=\"1\" class=\"dataframe\">"
             "<thead><tr><th>Step</th><th>Training Loss</th></tr></thead><tbody>"
             + "".join(f"<tr><td>{i}</td><td>{2.0 - i / 100:.6f}</td></tr>" for i in range(1, 13)) + "</tbody></table>")
    error = {"output_type": "error", "ename": "OutOfMemoryError", "evalue": "CUDA out of memory. Tried to "
             "allocate 2.00 GiB. GPU 0 has a total capacity of 14.74 GiB of which 1.12 GiB is free. Process has "
             "13.61 GiB memory in use. Of the allocated memory 13.20 GiB is allocated by PyTorch, and 292.43 MiB "
             "is reserved by PyTorch but unallocated.",
             "traceback": ["\u001b[0;31m---------------------------------------------------------------------------"
                           "\u001b[0m", "\u001b[0;31mOutOfMemoryError\u001b[0m                          Traceback "
                           "(most recent call last)", "Cell \u001b[0;32mIn[9], line 1\u001b[0m\n\u001b[0;32m----> "
                           "1\u001b[0m trainer_stats \u001b[38;5;241m=\u001b[39m trainer\u001b[38;5;241m.\u001b[39m"
                           "train()\n"]}
    document = {"cells": [{"cell_type": "code", "source": ["trainer_stats = trainer.train()"], "outputs": [
        {"output_type": "display_data", "data": {"text/html": [table], "text/plain": ["<IPython.core.display."
                                                                                     "HTML object>"]}},
        error]}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "run.ipynb"
    path.write_text(json.dumps(document))
    assert main(["doctor", str(path), "--json"]) == 1
    items = json.loads(capsys.readouterr().out)
    assert items[0]["id"] == "oom_full" and items[0]["step"] == 12, items


def test_a_pasted_notebook_loss_table_is_judged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The Trainer's Jupyter table copied as text (Step / Training Loss, tab-separated): its rows are the logs."""
    rows = [2.0, 1.8, 1.6, 1.5, 1.7, 1.9, 2.1, 2.3]
    text = "Step\tTraining Loss\n" + "".join(f"{i * 10}\t{v:.6f}\n" for i, v in enumerate(rows, start=1))
    _, items = _doctor_text(tmp_path, text, capsys)
    assert items and items[0]["id"] == "loss_diverging", items


def test_prose_with_nothing_to_judge_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 23: where the text holds no evidence, say so rather than call it healthy. A question with no log
    read "no problems found", as a healthy log does; it now says nothing in it could show health either."""
    paste = tmp_path / "question.txt"
    paste.write_text("How much VRAM do I need to fine-tune llama 3 8b with qlora? I have a 24GB card.\n")
    assert main(["doctor", str(paste), "--no-guess"]) == 0
    out = capsys.readouterr().out
    assert "no problems found" in out and "nothing to judge" in out and "paste the run's log" in out


def test_a_healthy_log_is_judged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Loss values were read and judged: no "nothing to judge" note."""
    log = tmp_path / "train.log"
    log.write_text("".join(f"{{'loss': {2.0 - i / 20:.3f}, 'learning_rate': 0.0002, 'epoch': {i / 10}}}\n"
                           for i in range(1, 11)))
    assert main(["doctor", str(log)]) == 0
    out = capsys.readouterr().out
    assert "no problems found" in out and "nothing to judge" not in out


def test_a_log_without_step_numbers_says_its_steps_are_places(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Printed dicts with no step: `(step 5)` would read as the run's own step 5; the header says a step here is
    a log's place. A log that prints its steps gets no such note."""
    rising = [1.1, 1.3, 1.6, 2.2, 3.1]
    log = tmp_path / "train.log"
    log.write_text("".join(f"{{'loss': {v}, 'learning_rate': 0.0002, 'epoch': {i / 100}}}\n"
                           for i, v in enumerate(rising, 1)))
    main(["doctor", str(log), "--no-guess"])
    out = capsys.readouterr().out
    assert "loss_diverging" in out and "a step here is a log's place in the text" in out
    log.write_text("".join(f"{{'loss': {2.0 - i / 20}, 'learning_rate': 0.0002, 'epoch': {i / 100}}}\n"
                           for i in range(1, 8)))
    main(["doctor", str(log), "--no-guess"])
    assert "log's place" not in capsys.readouterr().out  # no item names a step: nothing to explain
    log.write_text("".join(f"step {i * 10} | loss {v}\n" for i, v in enumerate(rising, 1)))
    main(["doctor", str(log), "--no-guess"])
    out = capsys.readouterr().out
    assert "loss_diverging" in out and "log's place" not in out
