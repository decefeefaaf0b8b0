"""A user's TRL script: SFTTrainer with a peft LoraConfig, on CPU. It knows nothing of loratui."""

import argparse

from datasets import Dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer

parser = argparse.ArgumentParser()
parser.add_argument("--model", required=True)
parser.add_argument("--out", required=True)
parser.add_argument("--max-steps", type=int, default=30)
args = parser.parse_args()

tokenizer = AutoTokenizer.from_pretrained(args.model)
model = AutoModelForCausalLM.from_pretrained(args.model)
dataset = Dataset.from_dict({"text": [f"Question {i}: what is {i} plus {i}? Answer: {2 * i}." for i in range(256)]})
config = SFTConfig(output_dir=args.out, per_device_train_batch_size=4, max_steps=args.max_steps, logging_steps=1,
                   learning_rate=2e-4, max_length=64, report_to="none", use_cpu=True, seed=0, save_steps=200)
peft_config = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM")
trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer,
                     peft_config=peft_config)
trainer.train()
