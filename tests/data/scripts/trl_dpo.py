"""A user's TRL script: DPOTrainer with a peft LoraConfig (no ref_model: the adapter off is the reference), on CPU.
It knows nothing of loratui."""

import argparse

from datasets import Dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import DPOConfig, DPOTrainer

parser = argparse.ArgumentParser()
parser.add_argument("--model", required=True)
parser.add_argument("--out", required=True)
parser.add_argument("--max-steps", type=int, default=6)
args = parser.parse_args()

tokenizer = AutoTokenizer.from_pretrained(args.model)
model = AutoModelForCausalLM.from_pretrained(args.model)
rows = [{"prompt": f"Question {i}: what is {i} plus {i}?", "chosen": f" Answer: {2 * i}.",
         "rejected": f" Answer: {2 * i + 1}, or so I think."} for i in range(64)]
config = DPOConfig(output_dir=args.out, per_device_train_batch_size=4, max_steps=args.max_steps, logging_steps=1,
                   learning_rate=5e-4, max_length=64, report_to="none", use_cpu=True, seed=0, save_strategy="no")
peft_config = LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM")
trainer = DPOTrainer(model=model, args=config, train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                     peft_config=peft_config)
trainer.train()
