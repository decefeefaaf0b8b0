"""A user's TRL SFTTrainer script (LoRA, CPU) that reports what its process holds, during training and after:
its argv, working directory, environment, open file descriptors and loaded modules. It knows nothing of loratui."""

import argparse
import json
import os
import sys

from datasets import Dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import SFTConfig, SFTTrainer

parser = argparse.ArgumentParser()
parser.add_argument("--model", required=True)
parser.add_argument("--out", required=True)
parser.add_argument("--report", required=True)
args = parser.parse_args()


def view():
    fds = {}
    for fd in sorted(os.listdir("/proc/self/fd"), key=int):
        if int(fd) > 2:
            try:
                fds[fd] = [os.readlink(f"/proc/self/fd/{fd}"), os.get_inheritable(int(fd))]
            except OSError:  # the directory listing's own descriptor, closed by now
                pass
    return {"argv": [a for a in sys.argv if a != args.report], "cwd": os.getcwd(), "env": dict(os.environ),
            "fds": fds, "modules": sorted(sys.modules)}


class Probe(TrainerCallback):
    def on_step_end(self, args_, state, control, **kwargs):
        if state.global_step == 2:
            self.during = view()


tokenizer = AutoTokenizer.from_pretrained(args.model)
model = AutoModelForCausalLM.from_pretrained(args.model)
dataset = Dataset.from_dict({"text": [f"Question {i}: what is {i} plus {i}? Answer: {2 * i}." for i in range(32)]})
config = SFTConfig(output_dir=args.out, per_device_train_batch_size=4, max_steps=3, logging_steps=1, max_length=64,
                   report_to="none", use_cpu=True, seed=0, save_strategy="no", disable_tqdm=True)
probe = Probe()
trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer, callbacks=[probe],
                     peft_config=LoraConfig(r=8, target_modules="all-linear", task_type="CAUSAL_LM"))
trainer.train()
report = {"during": probe.during, "after": view()}  # before the report's own file is open
with open(args.report, "w") as handle:
    json.dump(report, handle)
