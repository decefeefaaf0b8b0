"""Issue 7's baseline (a): the same QLoRA training as `loratui run`, as a plain transformers Trainer script.

    python bench/plain_trainer.py RECIPE --model-path DIR --max-steps N --out STEPS.json [--output-dir D]

Model, LoRA, data and TrainingArguments come from the very functions loratui's trainer uses
(`loratui.trainer.build` / `loratui.trainer.data`), so (a) and (b) train the same thing; what (a) lacks is
the monitoring: no supervisor, no NVML sampler, no event callback, no token-counting hook, no control
channel. Step times come from a minimal callback on the same clock and the same hooks as loratui's
(`time.perf_counter()` from `on_step_begin` to `on_step_end`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("recipe", type=Path)
    p.add_argument("--model-path", required=True)
    p.add_argument("--max-steps", type=int, default=8)
    p.add_argument("--out", required=True)
    p.add_argument("--output-dir", default="/tmp/plain_trainer_out")
    a = p.parse_args()
    t0 = time.time()
    import torch
    import transformers
    from transformers import Trainer, TrainerCallback

    from loratui.recipe import load_recipe
    from loratui.trainer import build, data

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.start = 0.0
            self.times: list[float] = []

        def on_step_begin(self, args, state, control, **kw):  # noqa: ANN001, ANN003
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):  # noqa: ANN001, ANN003
            self.times.append(time.perf_counter() - self.start)

    cuda = torch.cuda.is_available()
    recipe = build.resolve_for_machine(load_recipe(a.recipe), cuda).recipe
    base_dir = a.recipe.resolve().parent
    tokenizer = build.load_tokenizer(a.model_path, recipe)
    rows = data.load_rows(recipe.data, base_dir)
    dataset = data.tokenise(rows, recipe.data, tokenizer)
    transformers.set_seed(recipe.training.seed)
    t1 = time.time()
    model = build.load_model(recipe, a.model_path, cuda)
    t2 = time.time()
    timer = StepTimer()
    trainer = Trainer(model=model, args=build.training_arguments(recipe, a.output_dir, a.max_steps),
                      train_dataset=dataset, data_collator=data.PadCollator(tokenizer.pad_token_id),
                      callbacks=[timer])
    trainer.train()
    t3 = time.time()
    lengths = sorted({len(r["input_ids"]) for r in dataset})
    result = {
        "step_times": timer.times, "examples": len(dataset), "lengths": lengths[:5],
        "batch": recipe.training.per_device_train_batch_size,
        "grad_accum": recipe.training.gradient_accumulation_steps, "max_length": recipe.data.max_length,
        "packing": recipe.data.packing, "setup_s": round(t1 - t0, 1), "load_s": round(t2 - t1, 1),
        "train_s": round(t3 - t2, 1),
        "peak_reserved": torch.cuda.max_memory_reserved() if cuda else None,
        "peak_allocated": torch.cuda.max_memory_allocated() if cuda else None,
    }
    Path(a.out).write_text(json.dumps(result))
    print("PLAIN " + json.dumps({k: v for k, v in result.items() if k != "step_times"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
