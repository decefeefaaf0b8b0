"""What the estimate's dataset scan costs a watched run's start (polish8 item 4).

A Trainer script whose torch Dataset has 20,000 items and a __getitem__ that takes 1 ms (a lazy transform, a
streaming-like map) runs alone and under `loratui run --headless --`; the script itself times from its
`trainer.train()` call to its first step's `on_step_begin`, so the figure holds loratui's train-begin work
(the preflight estimate measures the dataset there) and nothing of the process start.

    python bench/slow_dataset_start.py [--reps 3]          # prints one line per run and the medians
    python bench/slow_dataset_start.py --script OUT.json   # the watched script itself (the driver runs it)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ITEMS, ITEM_S = 20_000, 0.001


def script(out: str) -> None:
    import torch
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        DataCollatorForLanguageModeling,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )

    from loratui.trainer.tiny import ensure_tiny_model

    class Slow(torch.utils.data.Dataset):
        def __init__(self, ids: list[int]) -> None:
            self.ids = ids

        def __len__(self) -> int:
            return ITEMS

        def __getitem__(self, i: int) -> dict[str, list[int]]:
            time.sleep(ITEM_S)  # the transform's cost
            return {"input_ids": self.ids[: 8 + i % 24]}

    class First(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step == 0:
                Path(out).write_text(json.dumps({"start_s": time.perf_counter() - called}))

    model_dir = ensure_tiny_model()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    ids = tokenizer("the quick brown fox jumps over the lazy dog " * 8)["input_ids"]
    args = TrainingArguments(output_dir=tempfile.mkdtemp(), per_device_train_batch_size=4, max_steps=2,
                             logging_steps=1, report_to="none", use_cpu=True, save_strategy="no", seed=0,
                             disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=Slow(ids), callbacks=[First()],
                      data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False))
    called = time.perf_counter()
    trainer.train()


def once(watched: bool) -> float:
    with tempfile.TemporaryDirectory(prefix="sds-", dir="/tmp") as tmp:
        out = Path(tmp) / "start.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--script", str(out)]
        if watched:
            command = [sys.executable, "-m", "loratui", "run", "--headless", "--runs-dir", f"{tmp}/runs", "--",
                       *command]
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT), TOKENIZERS_PARALLELISM="false")
        subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True, timeout=600)
        return float(json.loads(out.read_text())["start_s"])


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--script", default=None)
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args()
    if a.script:
        script(a.script)
        return 0
    found: dict[str, list[float]] = {"alone": [], "watched": []}
    for rep in range(a.reps):  # alternated, so a busier minute of the box weighs on both
        for name in ("alone", "watched"):
            found[name].append(once(name == "watched"))
            print(f"rep {rep} {name}: train() to first step {found[name][-1]:.3f} s", flush=True)
    for name, times in found.items():
        print(f"{name}: median {statistics.median(times):.3f} s ({', '.join(f'{t:.3f}' for t in times)})")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
