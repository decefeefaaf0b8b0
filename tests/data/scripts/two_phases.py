"""A user's script with two training phases, each its own Trainer whose train() starts at step 1: a short warm-up
at a low learning rate, then the main run. It knows nothing of loratui:
`loratui run -- python two_phases.py --model DIR --out DIR` watches it.
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
    TrainingArguments,
)

parser = argparse.ArgumentParser()
parser.add_argument("--model", required=True)
parser.add_argument("--out", required=True)
parser.add_argument("--warmup-steps", type=int, default=4)
parser.add_argument("--main-steps", type=int, default=6)
args = parser.parse_args()

torch.manual_seed(0)
tokenizer = AutoTokenizer.from_pretrained(args.model)
model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32)
model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, task_type="CAUSAL_LM", target_modules=["q_proj", "v_proj"]))
texts = [f"Example {i}: the quick brown fox jumps over the lazy dog {i % 7} times." for i in range(64)]
dataset = Dataset.from_dict({"text": texts}).map(
    lambda batch: tokenizer(batch["text"], truncation=True, max_length=32), batched=True, remove_columns=["text"])
collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)

for name, steps, lr in (("warmup", args.warmup_steps, 1e-5), ("main", args.main_steps, 2e-4)):
    training_args = TrainingArguments(
        output_dir=f"{args.out}/{name}", per_device_train_batch_size=4, logging_steps=1, save_strategy="no",
        learning_rate=lr, max_steps=steps, remove_unused_columns=False, report_to="none", use_cpu=True, seed=0,
        disable_tqdm=True)
    Trainer(model=model, args=training_args, train_dataset=dataset, data_collator=collator).train()
    print(f"phase {name} done", flush=True)
