"""Issue 24's TRL figure: a user's TRL `SFTTrainer` QLoRA script, for a 7B-shaped checkpoint.

    accelerate launch --num_processes 1 bench/trl_sft_qlora.py --model DIR [--batch 8] [--seq 512] [--max-steps 8]
    python -m loratui run --headless -- accelerate launch --num_processes 1 bench/trl_sft_qlora.py --model DIR

It knows nothing of loratui: the model loaded in 4 bits (NF4, double quant, bf16 compute) the way TRL's docs do,
a peft `LoraConfig` (r=16, all-linear) handed to `SFTTrainer`, which prepares the model itself, and `SFTConfig`'s
defaults otherwise (gradient checkpointing on, its own optimizer default). The data are pre-tokenised random ids of
exactly --seq tokens, so every batch is batch x seq. `--kbit-prepare` also calls peft's
`prepare_model_for_kbit_training` first, as older TRL examples did. It prints `FACTS {json}` (bench/memfacts.py:
dtypes, the forward TRL installs, the batch shape, torch's peaks). Without CUDA it trains a small model unquantised
(a CPU smoke test only).
"""

import argparse

import torch
from datasets import Dataset
from memfacts import MemFacts, print_facts
from peft import LoraConfig, prepare_model_for_kbit_training
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig
from trl import SFTConfig, SFTTrainer

parser = argparse.ArgumentParser()
parser.add_argument("--model", required=True)
parser.add_argument("--out", default="/tmp/trl_sft_out")
parser.add_argument("--max-steps", type=int, default=8)
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--seq", type=int, default=512)
parser.add_argument("--optim", default=None, help="SFTConfig.optim (default: TRL's own)")
parser.add_argument("--kbit-prepare", action="store_true")
args = parser.parse_args()

cuda = torch.cuda.is_available()
tokenizer = AutoTokenizer.from_pretrained(args.model)
if cuda:
    bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                             bnb_4bit_compute_dtype=torch.bfloat16)
    model = AutoModelForCausalLM.from_pretrained(args.model, quantization_config=bnb, dtype=torch.bfloat16,
                                                 attn_implementation="sdpa")
    if args.kbit_prepare:
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=True)
else:
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
g = torch.Generator().manual_seed(0)
vocab = min(model.config.vocab_size, len(tokenizer))
ids = torch.randint(0, vocab, (args.max_steps * args.batch, args.seq), generator=g).tolist()
dataset = Dataset.from_dict({"input_ids": ids})
extra = {"optim": args.optim} if args.optim else {}
config = SFTConfig(output_dir=args.out, per_device_train_batch_size=args.batch, max_steps=args.max_steps,
                   max_length=args.seq, learning_rate=2e-4, logging_steps=1, save_strategy="no", bf16=cuda,
                   use_cpu=not cuda, report_to="none", seed=0, disable_tqdm=True, dataloader_num_workers=0, **extra)
peft_config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules="all-linear", task_type="CAUSAL_LM")
facts = MemFacts()
trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer,
                     peft_config=peft_config, callbacks=[facts])
trainer.train()
facts.facts["script_max_memory_allocated"] = torch.cuda.max_memory_allocated() if cuda else None
print_facts(facts)
