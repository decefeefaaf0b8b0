"""A small CUDA Trainer script that prints its own `torch.cuda.max_memory_allocated()` (issue 24 item 2).

bench/peak_no_trace.sh runs it alone and under `loratui run --`: the two numbers must be equal (loratui used
to reset the peak counters every step inside the user's process: 17.45 GiB alone, 7.89 GiB watched). A random
Llama built from a config (no download), a fixed seed and fixed data, so both runs allocate the same.
It knows nothing of loratui.
"""

import argparse

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--seq", type=int, default=512)
parser.add_argument("--cpu", action="store_true", help="a smoke check of the script and bench/peak_no_trace.sh")
args = parser.parse_args()

resets = []
_reset = torch.cuda.reset_peak_memory_stats


def counting_reset(*a, **k):  # who resets this script's peak counters
    resets.append(1)
    return _reset(*a, **k)


torch.cuda.reset_peak_memory_stats = counting_reset
torch.manual_seed(0)
config = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                     num_key_value_heads=4, vocab_size=32000, max_position_embeddings=args.seq)
config.use_cache = False
model = LlamaForCausalLM(config)
ids = torch.randint(0, config.vocab_size, (args.batch * args.steps, args.seq))
data = [{"input_ids": row, "attention_mask": torch.ones_like(row), "labels": row} for row in ids]
training_args = TrainingArguments(output_dir=args.out, per_device_train_batch_size=args.batch, max_steps=args.steps,
                                  logging_steps=1, save_strategy="no", report_to="none", seed=0, bf16=not args.cpu,
                                  use_cpu=args.cpu,
                                  disable_tqdm=True)
Trainer(model=model, args=training_args, train_dataset=data).train()
print(f"MAXALLOC {torch.cuda.max_memory_allocated()} RESETS {len(resets)}", flush=True)
