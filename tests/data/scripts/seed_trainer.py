"""A user's LoRA script in the style of the seed guide's section 3 (transformers Trainer + peft), on CPU.

It knows nothing of loratui: `loratui run -- python seed_trainer.py --model DIR --out DIR` watches it.
"""

import argparse

import torch
from datasets import Dataset
from peft import LoraConfig, get_peft_model
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    DataCollatorForLanguageModeling,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    set_seed,
)

parser = argparse.ArgumentParser()
parser.add_argument("--model", required=True)
parser.add_argument("--out", required=True)
parser.add_argument("--max-steps", type=int, default=30)
parser.add_argument("--fail-at", type=int, default=0, help="raise a CUDA OOM at this step (a failing run)")
parser.add_argument("--ddp-backend", default=None)
parser.add_argument("--nan-at", type=int, default=0, help="a LoRA weight NaN after this step (a NaN run)")
parser.add_argument("--max-grad-norm", type=float, default=0.3, help="0: no clipping, so no grad_norm logged")
parser.add_argument("--lora-dropout", type=float, default=0.05)
args = parser.parse_args()

# Seeded before the model is built, as transformers' example scripts do: the LoRA A matrices are drawn when
# get_peft_model runs, before the Trainer seeds anything, and each new process starts torch's generator from
# a different seed, so without this no two runs of the script begin from the same weights.
set_seed(0)
tokenizer = AutoTokenizer.from_pretrained(args.model)
model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32)
lora_config = LoraConfig(r=8, lora_alpha=16, lora_dropout=args.lora_dropout, bias="none", task_type="CAUSAL_LM",
                         target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
model = get_peft_model(model, lora_config)
model.print_trainable_parameters()

texts = [f"Example {i}: the quick brown fox jumps over the lazy dog {i % 7} times." for i in range(256)]
dataset = Dataset.from_dict({"text": texts}).map(
    lambda batch: tokenizer(batch["text"], truncation=True, max_length=64), batched=True, remove_columns=["text"])
collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)


class FailAt(TrainerCallback):
    def on_step_end(self, args_, state, control, **kwargs):
        if args.fail_at and state.global_step >= args.fail_at:
            raise torch.OutOfMemoryError(
                "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 31.36 GiB of "
                "which 1.12 GiB is free. Including non-PyTorch memory, this process has 30.23 GiB memory in use. "
                "Of the allocated memory 29.10 GiB is allocated by PyTorch, and 0.61 GiB is reserved by PyTorch "
                "but unallocated.")



class NanAt(TrainerCallback):
    """Every later loss is NaN, as after a diverged update; the gradients go NaN with it."""

    def on_step_end(self, args_, state, control, model=None, **kwargs):
        if args.nan_at and state.global_step == args.nan_at:
            with torch.no_grad():
                next(p for n, p in model.named_parameters() if "lora_B" in n).fill_(float("nan"))


training_args = TrainingArguments(
    output_dir=args.out, per_device_train_batch_size=4, gradient_accumulation_steps=1, logging_steps=1,
    save_steps=200, learning_rate=2e-4, max_steps=args.max_steps, lr_scheduler_type="cosine",
    max_grad_norm=args.max_grad_norm, remove_unused_columns=False, report_to="none", use_cpu=True, seed=0,
    ddp_backend=args.ddp_backend, disable_tqdm=False,
)
trainer = Trainer(model=model, args=training_args, train_dataset=dataset, data_collator=collator,
                  callbacks=[FailAt(), NanAt()])
trainer.train()
trainer.save_model(f"{args.out}/final")
print("saved the adapter to", f"{args.out}/final")
