"""A Trainer script whose torch Dataset crops each example at random in __getitem__ (an augmentation that
draws from torch's generator), as a user's script would: its printed losses alone and watched must be equal
(tests/test_watch_no_trace.py). Usage: random_crop.py MODEL_DIR OUT_DIR."""

import sys

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    DataCollatorForLanguageModeling,
    Trainer,
    TrainingArguments,
)


class RandomCrop(torch.utils.data.Dataset):
    def __init__(self, rows):
        self.rows = rows

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        ids = self.rows[i]
        keep = int(torch.randint(len(ids) // 2, len(ids) + 1, ()))
        return {"input_ids": ids[:keep]}


tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
model = AutoModelForCausalLM.from_pretrained(sys.argv[1])
rows = [tokenizer(f"Example {i}: the quick brown fox jumps over the lazy dog {i % 7} times.")["input_ids"]
        for i in range(64)]
args = TrainingArguments(output_dir=sys.argv[2], per_device_train_batch_size=4, max_steps=3, logging_steps=1,
                         report_to="none", use_cpu=True, save_strategy="no", seed=0, disable_tqdm=True)
Trainer(model=model, args=args, train_dataset=RandomCrop(rows),
        data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False)).train()
