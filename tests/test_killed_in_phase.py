"""Issue 23: a run killed outright (the kernel's OOM killer: torchrun's `exitcode: -9`, a notebook's kernel that died,
进程被kill) while it saved or evaluated is the host's memory running out in that phase. The phase is the last status
the log printed: a launcher's report naming the script (`train.py FAILED`) is no status of training. The wordings are
our own, built on the launchers' and notebooks' own lines; negatives keep their answer."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream
from loratui.logic.advisor import phase_text

TORCHRUN_KILLED = """Traceback (most recent call last):
  File "/usr/bin/torchrun", line 8, in <module>
    sys.exit(main())
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  rank      : 0 (local_rank: 0)
  exitcode  : -9 (pid: 12345)
  traceback : Signal 9 (SIGKILL) received by PID 12345
============================================================"""



def first(text: str) -> tuple[str, str]:
    items = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")[0]
    return (items[0].id, items[0].title) if items else ("", "")


@pytest.mark.parametrize("text, expected", [
    ("{'loss': 1.1, 'epoch': 1.0}\nSaving model checkpoint to out/checkpoint-1000\n" + TORCHRUN_KILLED, "oom_at_save"),
    ("***** Running Evaluation *****\n  Num examples = 5000\n  Batch size = 8\n" + TORCHRUN_KILLED, "oom_at_eval"),
    ("Saving model checkpoint to out/checkpoint-500\nsft_train.py: exited with return code -9", "oom_at_save"),
])
def test_a_launchers_report_naming_the_script_is_no_status(text: str, expected: str) -> None:
    """Mechanism: the last status before the kill says where the run was; the launcher's report names the script
    (`train.py FAILED`), a file, not the run entering training."""
    found, title = first(text)
    assert found == expected and "host memory" in title


@pytest.mark.parametrize("line", ["train.py FAILED", "eval.sh: line 3: 1234 Killed", "==> train_sft.yaml <=="])
def test_a_file_named_for_a_phase_is_no_status(line: str) -> None:
    assert phase_text._STATUS.search(line) is None


@pytest.mark.parametrize("text, expected", [
    ("Unsloth: Merging 4bit and LoRA weights to 16bit...\nUnsloth: Will use up to 5.34 out of 12.67 RAM for saving.\n"
     "The Kernel crashed while executing code in the current cell or a previous cell.", "oom_at_save"),
    ("***** Running Evaluation *****\n  Num examples = 5000\nThe kernel appears to have died. It will restart "
     "automatically.", "oom_at_eval"),
    ("合并lora权重的时候进程直接被kill了", "oom_at_save"),
    ("评估到一半进程被杀了", "oom_at_eval"),
])
def test_a_kernel_or_process_killed_outright_is_the_hosts_memory(text: str, expected: str) -> None:
    """Mechanism: a process killed with no error of its own (a notebook's kernel that died, 进程被kill, as the shell's
    `Killed`) is most often the kernel's OOM killer: the host's RAM, in the phase the run was in."""
    found, title = first(text)
    assert found == expected and "host memory" in title


@pytest.mark.parametrize("text", ["我把进程杀了，然后重新训练", "I killed the kernel by hand and restarted the training."])
def test_a_process_the_person_killed_is_no_oom(text: str) -> None:
    assert not first(text)[0].startswith("oom")


@pytest.mark.parametrize("text", [
    # the person's `out of memory` first, the shell's kill after it (CenterPoint's info files, paraphrased)
    "I'm running out of memory when I try to pickle the info:\nsample: 158081\nKilled\n"
    "My machine has 256 GB RAM; does this really need more than that?",
    "the training process was killed by kernel without any warning. I think it's because of out of memory. "
    "My machine only has 16G memory.",
    "The training runs out of memory at step 200\nKilled",
])
def test_an_oom_the_person_only_named_is_the_hosts_when_the_host_killed_it(text: str) -> None:
    """R19b: an OOM named only in the person's words, with no card in them, is the one the host's kill or RAM words
    in the same text tell of: the host's RAM, not a full GPU."""
    found, title = first(text)
    assert found == "exception" and "host memory" in title


@pytest.mark.parametrize("text", [
    "'out of memory' error with 2080ti\nI used two 2080ti for training, but there was an out-of-memory error.",
    "The training runs out of memory on my RTX 3090 at step 200\nKilled",
])
def test_an_oom_said_of_a_card_stays_the_cards(text: str) -> None:
    """A card named beside the words (`2080ti`, `V100`), or `out-of-memory error` itself, keeps the OOM the GPU's."""
    found, _ = first(text)
    assert found.startswith("oom")
