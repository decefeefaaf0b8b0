"""doctor's cost on a big Trainer log, this checkout against another commit's, side by side in one run.

    python bench/doctor_speed.py [REV]   (REV: a git revision to compare with, checked out in a temporary worktree)

Writes a 10 MB log of 120,000 printed Trainer dicts and 12,000 progress bars (a healthy, noisy descent), then runs
`loratui doctor` on it with each tree, alternating, twice each; prints each run's user CPU seconds and the ratio.
"""

from __future__ import annotations

import random
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def write_log(path: Path) -> None:
    rng = random.Random(0)
    loss = 3.0
    with open(path, "w") as out:
        for i in range(1, 120_001):
            loss = max(0.5, loss * 0.99997 + rng.gauss(0, 0.01))
            out.write(f"{{'loss': {loss:.4f}, 'grad_norm': {abs(rng.gauss(1, 0.2)):.4f}, "
                      f"'learning_rate': 2e-05, 'epoch': {i / 40000:.4f}}}\n")
            if i % 10 == 0:
                out.write(f" {i // 10}%|██▌       | {i}/120000 [01:02<10:00,  1.50it/s]\n")


def cpu_seconds(tree: Path, log: Path) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    subprocess.run([sys.executable, "-m", "loratui", "doctor", str(log)], cwd=tree, env={"PYTHONPATH": str(tree)},
                   stdout=subprocess.DEVNULL, check=False)
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before


def main() -> None:
    rev = sys.argv[1] if len(sys.argv) > 1 else "HEAD~1"
    with tempfile.TemporaryDirectory() as scratch:
        log, other = Path(scratch) / "big.log", Path(scratch) / "other"
        write_log(log)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(other), rev], check=True)
        try:
            times: dict[str, list[float]] = {rev: [], "this": []}
            for _ in range(2):
                times[rev].append(cpu_seconds(other, log))
                times["this"].append(cpu_seconds(ROOT, log))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(other)], check=False)
    for name, runs in times.items():
        print(f"{name:>10}: " + ", ".join(f"{t:.1f} s" for t in runs))
    print(f"ratio this/{rev}: {min(times['this']) / min(times[rev]):.2f}")


if __name__ == "__main__":
    main()
