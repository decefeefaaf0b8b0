"""Issue 23: a process that the operating system, a shell or a launcher ended, said in their own words with no Python
traceback (`Illegal instruction (core dumped)`, `bad interpreter`, `srun: error: ...`, mpirun's ssh failures, a C++
exception nothing caught, a bus error), is the run's failure with the one next step each line is known for; not a
healthy run. A launcher's line about ranks that merely ended is no cause, a crash that is gone is not read, and a
traceback or a more specific reader always comes first."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream
from loratui.logic.advisor.died import (ARGPARSE_STEP, BAD_ALLOC_STEP, BUS_STEP, GLOG_STEP, HYDRA_STEP,
                                        ILLEGAL_STEP, SEGFAULT_STEP, SLURM_STEP, SSH_STEP, TERMINATE_STEP, process_died)
from loratui.logic.categories import answer_category


def items(text: str):
    return diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")[0]


@pytest.mark.parametrize(("line", "step"), [
    # dusty-nv/jetson-inference and HRNet threads (wave 65 dev), in a sentence and as the shell prints it
    ("I get illegal instruction (core dumped) error. Impossible to know or debug what is going on.", ILLEGAL_STEP),
    ("Illegal instruction (core dumped)", ILLEGAL_STEP),
    ("Segmentation fault (core dumped)", SEGFAULT_STEP),
    ("Fatal Python error: Segmentation fault", SEGFAULT_STEP),
    ("terminate called after throwing an instance of 'std::bad_alloc'", BAD_ALLOC_STEP),
    ("terminate called after throwing an instance of 'c10::Error'", TERMINATE_STEP),
    ("srun: error: Unable to create step for job 1234: Requested node configuration is not available", SLURM_STEP),
    ("the system will report error information `srun: error: Unable to allocate resources: Invalid account`",
     SLURM_STEP),
    ("sbatch: error: Batch job submission failed: Requested node configuration is not available", SLURM_STEP),
    ("root@worker-1.tensorflow-mnist-worker: Permission denied (publickey,password).", SSH_STEP),
    ("ssh: Could not resolve hostname node-w1-0: Temporary failure in name resolution", SSH_STEP),
    ("ssh: connect to host 10.0.0.2 port 22: Connection refused", SSH_STEP),
    ("ORTE was unable to reliably start one or more daemons.", SSH_STEP),
    ("Bus error (core dumped)", BUS_STEP),
    ("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
     BUS_STEP),
    # a script's own command-line parser refusing what it was given (MACE, Uni-Core threads, wave 78 dev), and Hydra
    ("> run_train.py: error: unrecognized arguments: --foundation_model=2024-01-07-mace-128-L2.model", ARGPARSE_STEP),
    ("unicore-train: error: argument --task: invalid choice: 'unimol_plus' (choose from )", ARGPARSE_STEP),
    ("train.py: error: the following arguments are required: --config", ARGPARSE_STEP),
    ("Cannot find primary config 'train'. Check that it's in your config search path.", HYDRA_STEP),
    # glog's fatal line, as Caffe-based and other C++ code prints it before it aborts (wave 82 dev)
    ("F0412 10:02:33.118204 4411 data_layer.cpp:87] Check failed: index < size (3 vs. 3) Invalid label", GLOG_STEP),
])
def test_a_line_that_says_a_process_died_gives_its_step(line: str, step: str) -> None:
    found = process_died(line)
    assert found is not None and found[1] == step


def test_a_bad_interpreter_names_the_script_and_the_missing_python() -> None:
    line = ("bash: /data/envs/py310/bin/deepspeed: /home/envs/py310/bin/python: bad interpreter: "
            "No such file or directory")
    found = process_died(line)
    assert found is not None
    assert "deepspeed's first line" in found[1] and "/home/envs/py310/bin/python" in found[1]
    assert "python /data/envs/py310/bin/deepspeed ARGS" in found[1]


@pytest.mark.parametrize("line", [
    "srun: error: node12: task 0: Exited with exit code 1",
    "srun: error: node3: tasks 0-7: Killed",
    "srun: error: Timed out waiting for job step to complete",
    "slurmstepd: error: *** STEP 42.0 ON node1 CANCELLED AT 2024-01-01T00:00:00 DUE TO TIME LIMIT ***",
    "I no longer get the segmentation fault after reinstalling torch.",
    "If you see Illegal instruction, set OPENBLAS_CORETYPE.",
    "The instruction tuning data is loaded from disk.",
    "error: unrecognized arguments: --bf16",
    "If you get `train.py: error: unrecognized arguments`, upgrade the package.",
    "ssh into the node and run nvidia-smi",
    "I0412 10:02:33.118204 4411 solver.cpp:218] Iteration 100, loss = 0.69",  # glog's info line
    "F1 score: 0.82 on the validation split",
])
def test_consequences_fixes_and_other_words_are_not_a_death(line: str) -> None:
    assert process_died(line) is None


def test_a_pasted_death_is_the_runs_failure_not_a_healthy_run() -> None:
    text = ("=> init weights from normal distribution\n=> loading pretrained model models/hrnet_w32.pth\n"
            "Illegal instruction (core dumped)\n")
    first = items(text)[0]
    assert answer_category([first]) == "exception_other"
    assert first.title.startswith("The process died without a Python traceback: Illegal instruction")
    assert "OPENBLAS_CORETYPE=ARMV8" in first.title


def test_a_traceback_comes_before_the_line_that_the_process_died() -> None:
    text = ("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    main()\n"
            "KeyError: 'input_ids'\nSegmentation fault (core dumped)\n")
    first = items(text)[0]
    assert first.title.startswith("The run failed on KeyError")


def test_a_cuda_error_is_read_by_its_own_reader_before_the_segfault() -> None:
    text = ("RuntimeError: CUDA error: an illegal memory access was encountered\n"
            "Segmentation fault (core dumped)\n")
    assert answer_category(items(text)[:1]) == "cuda_error"


def test_a_glog_fatal_line_that_says_an_oom_is_read_as_the_oom() -> None:
    text = "F0412 10:02:33.118204 4411 syncedmem.cpp:56] Check failed: error == cudaSuccess (2 vs. 0)  out of memory\n"
    assert answer_category(items(text)[:1]) == "oom_full"
