"""A user's TRL script: GRPOTrainer with a peft LoraConfig and a reward function of its own, on CPU.
It knows nothing of loratui."""

import argparse

from datasets import Dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

parser = argparse.ArgumentParser()
parser.add_argument("--model", required=True)
parser.add_argument("--out", required=True)
parser.add_argument("--max-steps", type=int, default=6)
args = parser.parse_args()


def digits_not_length(completions, **kwargs):
    return [sum(ch.isdigit() for ch in c) - 0.1 * len(c) for c in completions]


tokenizer = AutoTokenizer.from_pretrained(args.model)
model = AutoModelForCausalLM.from_pretrained(args.model)
dataset = Dataset.from_dict({"prompt": [f"Question {i}: what is {i} plus {i}? Answer:" for i in range(32)]})
config = GRPOConfig(output_dir=args.out, per_device_train_batch_size=4, num_generations=4, max_completion_length=16,
                    max_steps=args.max_steps, logging_steps=1, learning_rate=1e-3, report_to="none", use_cpu=True,
                    seed=0, save_strategy="no")
peft_config = LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM")
trainer = GRPOTrainer(model=model, reward_funcs=digits_not_length, args=config, train_dataset=dataset,
                      processing_class=tokenizer, peft_config=peft_config)
trainer.train()
