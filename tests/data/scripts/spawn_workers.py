"""A Trainer script whose DataLoader workers start by "spawn" (each re-imports this script, and with it
transformers' Trainer, without building one): each worker writes the loratui modules it has to REPORT_DIR
(tests/test_watch_no_trace.py). Usage: spawn_workers.py MODEL_DIR OUT_DIR REPORT_DIR."""

import json
import multiprocessing
import os
import sys

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    DataCollatorForLanguageModeling,
    Trainer,
    TrainingArguments,
)


class Reporting(torch.utils.data.Dataset):
    def __init__(self, rows, report_dir):
        self.rows, self.report_dir = rows, report_dir

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        if torch.utils.data.get_worker_info() is not None:
            loaded = sorted(m for m in sys.modules if m == "loratui" or m.startswith("loratui."))
            with open(os.path.join(self.report_dir, f"worker-{os.getpid()}.json"), "w") as out:
                json.dump(loaded, out)
        return {"input_ids": self.rows[i]}


def main():
    multiprocessing.set_start_method("spawn", force=True)
    model_dir, out_dir, report_dir = sys.argv[1:4]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    rows = [tokenizer(f"Example {i}: the quick brown fox.")["input_ids"] for i in range(32)]
    args = TrainingArguments(output_dir=out_dir, per_device_train_batch_size=4, max_steps=2, logging_steps=1,
                             report_to="none", use_cpu=True, save_strategy="no", dataloader_num_workers=2,
                             disable_tqdm=True)
    Trainer(model=model, args=args, train_dataset=Reporting(rows, report_dir),
            data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False)).train()


if __name__ == "__main__":
    main()
