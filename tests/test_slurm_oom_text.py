"""`doctor` of a Slurm job's output after the job went over its --mem (trial 14: `#SBATCH --mem=400M`, the
cgroup's OOM killer): srun's `task 0: Out Of Memory` was read as a CUDA OOM, "lower the batch size", with a word
model's guess that another process held the GPU's memory; it is the host's RAM and the job's limit."""

from __future__ import annotations

import pytest

from loratui.logic.advisor import Advisor
from loratui.logic.text_reader.reader import TextReader

SLURMSTEPD = ("slurmstepd-vm: error: Detected 1 oom-kill event(s) in StepId=147.0. Some of your processes may have been "
              "killed by the cgroup out-of-memory handler.")
SRUN = "srun: error: vm: task 0: Out Of Memory"


def _items(text: str) -> list:  # type: ignore[type-arg]
    reader, found = TextReader(), []
    for line in text.splitlines():
        found += reader.feed(line)
    found += reader.close()
    return Advisor(None, pasted=True).feed_all(found).items()


@pytest.mark.parametrize("text", [f"{SLURMSTEPD}\n{SRUN}\n", f"{SRUN}\n",
                                  f"Loading weights: 100%|##########| 50/50\n{SRUN}\n{SLURMSTEPD}\n"])
def test_a_job_over_its_mem_is_the_hosts_ram_and_its_limit(text: str) -> None:
    items = _items(text)
    assert items and items[0].title.startswith("Out of host memory: the Slurm job went over its memory limit"), \
        [i.title for i in items]
    assert "#SBATCH --mem" in items[0].title
    assert not any(i.id.startswith("oom_") for i in items), [i.id for i in items]


def test_a_cuda_oom_in_a_slurm_job_is_still_the_gpus() -> None:
    text = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "79.19 GiB of which 1.02 GiB is free.\nsrun: error: gpu-07: task 0: Exited with exit code 1\n")
    assert _items(text)[0].id.startswith("oom")
