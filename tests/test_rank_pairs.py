"""Issue 23: which finding leads when two kinds of evidence share one text (`advisor/rank.py`'s ladder).

Each pair is built from a PATTERN, not from one thread: two kinds of evidence in one text, the one that must
lead, and why (the rung of the ladder that decides). The pasted text goes through `doctor`'s own reader.
"""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream
from loratui.logic.advisor import rank


def judged(lines: list[str]) -> list[tuple[str, str]]:
    """(severity, id) of each item doctor prints for the pasted lines, in its order."""
    items, _ = diagnose_stream(io.BytesIO("\n".join(lines).encode("utf-8")), "pasted")
    return [(item.severity, item.id) for item in items]


def alarms(lines: list[str]) -> list[str]:
    """The ids of the errors and warnings, in order (notes left out)."""
    return [advice_id for severity, advice_id in judged(lines) if severity in ("error", "warning")]


def dicts(losses: list[float], grad: str = "1.1", lr: str = "2e-05") -> list[str]:
    """A transformers Trainer's printed logs, one per loss."""
    return [f"{{'loss': {loss}, 'grad_norm': {grad}, 'learning_rate': {lr}, 'epoch': {i / 20:.2f}}}"
            for i, loss in enumerate(losses, 1)]


def falling(n: int = 14, start: float = 2.6, ratio: float = 0.93) -> list[float]:
    return [round(start * ratio ** i, 4) for i in range(n)]


def traceback(frames: list[tuple[str, str, str]], error: str) -> list[str]:
    lines = ["Traceback (most recent call last):"]
    for path, func, code in frames:
        lines += [f'  File "{path}", line 212, in {func}', f"    {code}"]
    return lines + [error]


TRAIN_FRAMES = [("/home/me/sft.py", "main", "trainer.train()"),
                ("/opt/venv/lib/python3.11/site-packages/transformers/trainer.py", "training_step",
                 "self.accelerator.backward(loss)")]
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 39.39 "
       "GiB of which 812.00 MiB is free. Including non-PyTorch memory, this process has 38.59 GiB memory in use. Of "
       "the allocated memory 37.90 GiB is allocated by PyTorch, and 220.00 MiB is reserved by PyTorch but "
       "unallocated.")
SHAPE = traceback([("/srv/proj/train.py", "main", "out = model(**batch)"),
                   ("/srv/proj/model.py", "forward", "h = self.proj(h).view(b, t, heads, -1)")],
                  "RuntimeError: shape '[8, 1024, 16, -1]' is invalid for input of size 3000")
FLASH_WARNING = ("flash-attention package not found, consider installing for better performance: No module named "
                 "'flash_attn'.")
BNB_WARNING = ("The installed version of bitsandbytes was compiled without GPU support. 8-bit optimizers, 8-bit "
               "multiplication, and GPU quantization are unavailable.")
WATCHDOG = ("[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=77, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600042 "
            "milliseconds before timing out.")
NAN_STEPS = dicts([1.92, 1.85, 1.80]) + dicts([float("nan")] * 2, grad="nan")


def test_the_ladder_is_written_down_once() -> None:
    """The four rungs, top first, each with its reason (the module's docstring explains them)."""
    assert [name for name, _ in rank.TIERS] == ["stopped", "measured", "said", "incidental"]
    assert all(reason for _, reason in rank.TIERS)


# -- rung 1 over rung 4: what stopped the run over a warning printed earlier --------------------------------------

@pytest.mark.parametrize("warning", [FLASH_WARNING, BNB_WARNING])
def test_the_oom_that_stopped_the_run_leads_a_setup_warning_before_it(warning: str) -> None:
    found = alarms([warning, *dicts(falling(3)), *traceback(TRAIN_FRAMES, OOM)])
    assert found[0] == "oom_full"


@pytest.mark.parametrize("warning", [FLASH_WARNING, BNB_WARNING])
def test_the_final_exception_leads_a_setup_warning_it_does_not_touch(warning: str) -> None:
    assert alarms([warning, *SHAPE])[0] == "exception"


def test_a_setup_error_raised_on_one_rank_leads_the_timeout_it_caused() -> None:
    """Rung 1 within itself: the root before its consequence (the other ranks waited for this one)."""
    found = alarms([("[rank1]: RuntimeError: CUDA Setup failed despite GPU being available. Please run the following "
                    "command to get more information: python -m bitsandbytes"), WATCHDOG])
    assert found[:2] == ["bnb_setup", "nccl_timeout"]


# -- rung 2 over rung 3: a measured number over the person's words ------------------------------------------------

def test_a_nan_the_log_prints_leads_an_oom_the_person_had_earlier() -> None:
    """Their words tell the run's history (`I got OOM, lowered the batch`): the log shows what is wrong now."""
    found = alarms(["I got OOM at first, so I lowered the batch size to 2. Now this happens:", *NAN_STEPS])
    assert found == ["nan_loss"]


@pytest.mark.parametrize("words", ["The loss is not decreasing, what am I doing wrong?",
                                   "my training loss keeps going up:"])
def test_a_loss_series_that_falls_to_its_end_outranks_words_that_it_does_not(words: str) -> None:
    assert alarms([words, *dicts(falling(14))]) == []


def oom_account(free: str, others: str, ours: str, allocated: str, spare: str) -> str:
    """A torch 2.x OOM message with its numbers (a 23.64 GiB card)."""
    held = f" Process 4411 has {others} memory in use." if others else ""
    return (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            f"23.64 GiB of which {free} is free.{held} Including non-PyTorch memory, this process has {ours} memory in "
            f"use. Of the allocated memory {allocated} is allocated by PyTorch, and {spare} is reserved by PyTorch but "
            "unallocated.")


@pytest.mark.parametrize(("words", "account", "expected"), [
    ("I think this is memory fragmentation, there should be plenty of memory.",
     oom_account("1.12 GiB", "", "22.50 GiB", "21.80 GiB", "310.00 MiB"), "oom_full"),
    ("I think this is memory fragmentation.",
     oom_account("120.00 MiB", "19.20 GiB", "4.30 GiB", "3.80 GiB", "210.00 MiB"), "oom_other_process"),
    ("Maybe another process is using the GPU?",
     oom_account("1.12 GiB", "", "22.50 GiB", "14.80 GiB", "7.30 GiB"), "oom_fragmentation"),
])
def test_the_oom_account_outranks_the_persons_guess_at_its_kind(words: str, account: str, expected: str) -> None:
    """The message's numbers say who holds the card; the person's guess is a guess."""
    assert alarms([words, *traceback(TRAIN_FRAMES, account)])[:1] == [expected]


# -- rung 3 over rung 4: the stated symptom over incidental lines -------------------------------------------------

def test_the_stated_nan_leads_a_config_dump_and_a_deprecation_warning() -> None:
    found = alarms(["fp16: true", "learning_rate: 2e-4", "gradient_checkpointing: true",
                    "FutureWarning: `evaluation_strategy` is deprecated, use `eval_strategy` instead",
                    "After about 200 steps the loss becomes nan and stays nan."])
    assert found == ["nan_loss"]


WANDB_RETRIED = traceback([("/opt/venv/lib/python3.11/site-packages/wandb/sdk/internal/internal_api.py", "upload",
                            "response.raise_for_status()")],
                          "requests.exceptions.HTTPError: 502 Server Error: Bad Gateway for url: https://api.wandb.ai/")


@pytest.mark.parametrize("symptom", [["After about 200 steps the loss becomes nan and stays nan."],
                                     [*dicts(falling(4)), *dicts([float("nan")] * 2, grad="nan")]])
def test_the_nan_leads_an_earlier_error_the_run_went_on_past(symptom: list[str]) -> None:
    """A logger's upload error the run retried and went on past is incidental beside the stated or logged NaN."""
    assert alarms([*WANDB_RETRIED, *symptom]) == ["nan_loss"]


@pytest.mark.parametrize(("noise", "symptom", "expected"), [
    ("UserWarning: `use_cache=True` is incompatible with gradient checkpointing. Setting `use_cache=False`.",
     "The training loss stays at 2.30 from the first step and never goes down.", "loss_flat"),
    (("Some weights of LlamaForCausalLM were not initialized from the model checkpoint and are newly initialized: "
     "['score.weight']"), "loss is 0.0 from step 1", "loss_zero"),
])
def test_the_stated_loss_symptom_leads_a_library_warning(noise: str, symptom: str, expected: str) -> None:
    assert alarms([noise, symptom]) == [expected]


# -- rung 4: stopped by hand, or trained past the warning ---------------------------------------------------------

def test_a_run_stopped_by_hand_is_a_note_after_what_made_them_stop_it() -> None:
    found = judged([("Running tokenizer on dataset (num_proc=1):   3%|▎         | 30000/1000000 [1:00:00<32:20:00, "
                    "8.33 examples/s]"),
                    *traceback([("/opt/venv/lib/python3.11/site-packages/datasets/arrow_dataset.py", "map",
                                 "for i, example in enumerate(shard):")], "KeyboardInterrupt")])
    assert found[0][1] == "data_starved" and found[-1] == ("info", "exception")


def test_a_setup_warning_the_run_trained_past_is_a_note_not_an_alarm() -> None:
    assert alarms([BNB_WARNING, *dicts(falling(8))]) == []


SDPA_NOTE = ("UserWarning: 1Torch was not compiled with flash attention. (Triggered internally at "
             "..\\aten\\src\\ATen\\native\\transformers\\cuda\\sdp_utils.cpp:455.)")
IDLE_GPU = ["GPU utilization is only 5% and each step takes 20 seconds, the dataloader seems to be the bottleneck.",
            "| N/A   34C    P0    62W / 400W |  38500MiB / 81920MiB |      3%      Default |"]


@pytest.mark.parametrize("note", [BNB_WARNING, FLASH_WARNING, SDPA_NOTE])
def test_a_gpu_waiting_for_data_leads_a_setup_note_the_run_went_past(note: str) -> None:
    """Both are notes (info), but one is a problem the numbers show and the other says nothing failed there."""
    assert judged([note, *dicts(falling(8)), *IDLE_GPU])[0] == ("info", "data_starved")


@pytest.mark.parametrize("note", [BNB_WARNING, FLASH_WARNING])
def test_a_run_stopped_by_hand_after_training_past_a_setup_warning_did_not_fail(note: str) -> None:
    """Ctrl-C is no failure: the warning the run trained past stays a note."""
    stopped = traceback([("/home/me/sft.py", "main", "trainer.train()")], "KeyboardInterrupt")
    assert alarms([note, *dicts(falling(8)), *stopped]) == []


# -- a worried question is no report: no alarm without evidence ----------------------------------------------------

CALM = dicts(falling(8))


@pytest.mark.parametrize("question", [
    "Will this run out of memory if I increase max_length to 4096?",  # a condition: whatever the log shows
    "Could the loss go to nan once I switch to fp16? Just asking before I start.",
    "What if the loss becomes inf halfway through, does the Trainer stop?",
    "Would the loss stay flat if I freeze the embeddings?",
])
def test_a_question_about_what_might_happen_raises_no_alarm(question: str) -> None:
    assert alarms([question]) == []
    assert alarms([question, *CALM]) == []


@pytest.mark.parametrize("question", [
    "Why would the loss become nan? Mine looks fine so far, but I'm worried:",
    "My run is fine for now. Would it OOM later on when the long samples come?",
    "could the loss explode later with this learning rate? so far:",
])
def test_a_worried_question_over_a_calm_log_raises_no_alarm(question: str) -> None:
    """Beside a printed loss series that is finite to its end, a question about what might happen is a worry."""
    assert alarms([question, *CALM]) == []


@pytest.mark.parametrize(("report", "expected"), [
    ("Why does my loss become nan after 200 steps?", "nan_loss"),  # asked about what happened
    ("Why would my loss become nan after 200 steps?", "nan_loss"),  # `why would`: asked about what was seen
    ("Why do I keep getting CUDA out of memory on a 24GB card?", "oom_full"),
    ("I get CUDA out of memory, what should I do?", "oom_full"),
    ("Can anyone help? loss nan after epoch 2", "nan_loss"),
    ("Is it normal that the loss is stuck at 2.3 for 3000 steps?", "loss_flat"),
    ("Why would it run out of memory if the model is only 7B?", "oom_full"),  # `why would`: an OOM seen
    ("How come the loss would become nan when I use bf16?", "nan_loss"),
])
def test_a_report_phrased_as_a_question_still_counts(report: str, expected: str) -> None:
    assert alarms([report])[:1] == [expected]


def test_why_would_over_the_first_logs_asks_about_what_was_seen() -> None:
    """People paste the first logs of a run whose NaN came later: `why would ...` asks about the NaN they saw."""
    assert alarms(["Why would my loss become NaN after 300 steps? Here are the first logs:", *CALM]) == ["nan_loss"]


def test_a_nan_logged_after_a_worried_question_is_the_finding() -> None:
    """The question latched first must not hide the NaN the log prints after it (the log is not calm)."""
    found = alarms(["Why would the loss become nan? It trains fine for a while:", *CALM,
                    *dicts([float("nan")] * 2, grad="nan")])
    assert found == ["nan_loss"]
    found = alarms(["Why would the loss become nan? It trains fine for a while:", *CALM, *dicts([1.2], grad="nan")])
    assert found == ["nan_loss"]


# -- words about the run stopping are no loss that stays put ---------------------------------------------------------

@pytest.mark.parametrize("words", ["Training hangs at epoch 26 and never moves on.",
                                   "the training freezes after the first eval and gets no further",
                                   "训练到第10个epoch就卡住了，一直不动"])
def test_a_hang_in_words_is_no_flat_loss(words: str) -> None:
    assert "loss_flat" not in alarms([*dicts(falling(6)), words])


@pytest.mark.parametrize("words", ["the loss is stuck at 2.30 and never moves",
                                   "training loss hangs around 1.9 from the first step, it never goes down",
                                   "loss一直卡在2.3不动"])
def test_a_loss_said_to_stay_put_is_still_flat(words: str) -> None:
    assert alarms([words]) == ["loss_flat"]


# -- an exception Python says it ignored is no failure of the run ---------------------------------------------------

IGNORED_DEL = [  # the DataLoader's workers shut down from a __del__ at exit: seen in many threads, always harmless
    "Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f3b2c1d1ee0>",
    *traceback([("/opt/conda/lib/python3.10/site-packages/torch/utils/data/dataloader.py", "__del__",
                 "self._shutdown_workers()"),
                ("/opt/conda/lib/python3.10/multiprocessing/process.py", "is_alive",
                 "assert self._parent_pid == os.getpid(), 'can only test a child process'")],
               "AssertionError: can only test a child process")]
ATEXIT = ["Error in atexit._run_exitfuncs:",
          *traceback([("/opt/venv/lib/python3.11/site-packages/wandb/sdk/wandb_run.py", "_atexit_cleanup",
                       "self._on_finish()")], "wandb.errors.errors.Error: An unexpected error occurred")]


@pytest.mark.parametrize("ignored", [IGNORED_DEL, ATEXIT])
def test_an_ignored_exception_after_a_healthy_run_is_no_failure(ignored: list[str]) -> None:
    assert alarms([*dicts(falling(10)), *ignored]) == []


@pytest.mark.parametrize("ignored", [IGNORED_DEL, ATEXIT])
def test_the_stated_symptom_leads_an_ignored_exception(ignored: list[str]) -> None:
    assert alarms(["The loss is stuck at 2.30 and never goes down.", *ignored]) == ["loss_flat"]


def test_the_traceback_after_an_ignored_one_is_the_runs_own() -> None:
    items, _ = diagnose_stream(io.BytesIO("\n".join([*IGNORED_DEL, *SHAPE]).encode()), "pasted")
    assert items[0].id == "exception" and "shape '[8, 1024, 16, -1]'" in items[0].title


def test_a_cuda_fault_inside_an_ignored_exception_is_still_evidence() -> None:
    """CUDA's errors are sticky: the fault a destructor reports (pytorch-pwc#55, a dev record) is the run's."""
    found = alarms(["Exception ignored in: 'cupy.cuda.function.Module.__dealloc__'",
                    "Traceback (most recent call last):",
                    ('  File "cupy_backends\\\\cuda\\\\api\\\\driver.pyx", line 125, in '
                    "cupy_backends.cuda.api.driver.check_status"),
                    ("cupy_backends.cuda.api.driver.CUDADriverError: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access "
                    "was encountered")])
    assert found == ["cuda_error"]


# -- an exception the program retries is no failure of the run --------------------------------------------------------

@pytest.mark.parametrize("retried", [
    [("huggingface_hub.utils._errors.HfHubHTTPError: 429 Client Error: Too Many Requests for url: "
     "https://huggingface.co/api/models/org/model (retrying in 10s)")],
    traceback([("/opt/venv/lib/python3.11/site-packages/wandb/sdk/internal/internal_api.py", "execute",
                "return self.client.execute(*args, **kwargs)")],
              "wandb.errors.CommError: Network error (ConnectionError), entering retry loop."),
])
def test_an_exception_the_program_retries_is_no_failure(retried: list[str]) -> None:
    assert alarms([*retried, *dicts(falling(10))]) == []
    assert alarms([*retried, *SHAPE])[:1] == ["exception"]  # the error after it is the run's own
    items, _ = diagnose_stream(io.BytesIO("\n".join([*retried, *SHAPE]).encode()), "pasted")
    assert "shape '[8, 1024, 16, -1]'" in items[0].title


def test_retries_given_up_are_the_failure() -> None:
    found = alarms([("requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): Max "
                    "retries exceeded with url: /api/models/org/model (Caused by NewConnectionError('Failed to "
                    "establish a new connection: [Errno 101] Network is unreachable'))")])
    assert found == ["exception"]
