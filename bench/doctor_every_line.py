"""doctor's cost on a log where every line is a finding, this checkout against another commit's, side by side.

    python bench/doctor_every_line.py [REV] [LINES]   (REV default HEAD~1, LINES default 20000)

Writes two logs of LINES lines: printed Trainer dicts with a NaN loss and grad norm (every line a NaN finding), and
one CUDA OOM message repeated (every line an OOM). Runs `loratui doctor` on each with each tree, alternating, twice
each; prints each run's user CPU seconds. REV's `loratui/` is taken with `git archive` into a temporary folder (no
worktree is made).
"""

from __future__ import annotations

import io
import resource
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OOM = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "79.15 GiB of which 1.50 GiB is free. Of the allocated memory 70.00 GiB is allocated by PyTorch, and 5.00 GiB "
       "is reserved by PyTorch but unallocated.\n")


def write_logs(folder: Path, lines: int) -> dict[str, Path]:
    nan, oom = folder / "nan.log", folder / "oom.log"
    nan.write_text("".join(f"{{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': {i / lines:.4f}}}\n"
                           for i in range(1, lines + 1)))
    oom.write_text(OOM * lines)
    return {"NaN dicts": nan, "CUDA OOM lines": oom}


def cpu_seconds(tree: Path, log: Path) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    subprocess.run([sys.executable, "-m", "loratui", "doctor", str(log)], cwd=tree, env={"PYTHONPATH": str(tree)},
                   stdout=subprocess.DEVNULL, check=False)
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before


def main() -> None:
    rev = sys.argv[1] if len(sys.argv) > 1 else "HEAD~1"
    lines = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000
    with tempfile.TemporaryDirectory() as scratch:
        other = Path(scratch) / "other"
        other.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "loratui"], capture_output=True, check=True)
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(other, filter="data")
        for name, log in write_logs(Path(scratch), lines).items():
            times: dict[str, list[float]] = {rev: [], "this": []}
            for _ in range(2):
                times[rev].append(cpu_seconds(other, log))
                times["this"].append(cpu_seconds(ROOT, log))
            runs = "; ".join(f"{tree}: " + ", ".join(f"{t:.1f} s" for t in found) for tree, found in times.items())
            print(f"{lines} {name}: {runs}; ratio this/{rev} {min(times['this']) / min(times[rev]):.2f}")


if __name__ == "__main__":
    main()
