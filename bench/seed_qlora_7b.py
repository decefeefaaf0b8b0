"""Issue 17's H200 figure: a user's QLoRA script in the seed guide's section-3 style, for a 7B-shaped checkpoint.

    python bench/seed_qlora_7b.py --model DIR [--max-steps 12] [--batch 4] [--seq 1024] [--json OUT.json]
    python -m loratui run --headless -- python bench/seed_qlora_7b.py --model DIR ...   # the watched arm

It knows nothing of loratui (like tests/data/scripts/seed_trainer.py, which is CPU-only and takes no batch or
step settings): transformers Trainer + peft LoRA r=16 on q/k/v/o over a BitsAndBytesConfig NF4 + double-quant +
bf16-compute model, prepare_model_for_kbit_training, paged_adamw_8bit, gradient checkpointing, sdpa, batches of
random token ids. Its own callback times each optimiser step (perf_counter, on_step_begin to on_step_end, the
same hooks loratui's callback uses) and the last line printed is `SEED {json}` with the step times, so both
arms are timed the same way. Without CUDA it trains unquantised with adamw_torch (a CPU smoke test only).
Its parts (make_parser, load_model, dataset, training_arguments) are importable: bench/callback_interleaved.py
reuses them.
"""

import argparse
import json
import time

import torch
from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
from transformers import (
    AutoModelForCausalLM,
    BitsAndBytesConfig,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    default_data_collator,
)


def make_parser() -> argparse.ArgumentParser:
    """The script's options (bench/callback_interleaved.py adds its own to these)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", default="/tmp/seed_qlora_out")
    parser.add_argument("--max-steps", type=int, default=12)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--grad-accum", type=int, default=1)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--json", default=None, help="also write the SEED result here")
    parser.add_argument("--targets", default="q_proj,k_proj,v_proj,o_proj",
                        help="LoRA target_modules, comma-separated, or all-linear")
    parser.add_argument("--facts", action="store_true", help="also print FACTS {json} (bench/memfacts.py)")
    return parser


def load_model(args: argparse.Namespace, cuda: bool):
    """NF4 + double quant + bf16 compute, k-bit prepared, LoRA r=16 on q/k/v/o (fp32 unquantised on CPU)."""
    if cuda:
        bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                 bnb_4bit_compute_dtype=torch.bfloat16)
        model = AutoModelForCausalLM.from_pretrained(args.model, quantization_config=bnb, dtype=torch.bfloat16,
                                                     device_map={"": 0}, attn_implementation="sdpa")
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=True)
    else:
        model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32, attn_implementation="sdpa")
    model.config.use_cache = False
    lora_config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, bias="none", task_type="CAUSAL_LM",
                             target_modules=args.targets if args.targets == "all-linear" else args.targets.split(","))
    model = get_peft_model(model, lora_config)
    model.print_trainable_parameters()
    return model


class RandomIds(torch.utils.data.Dataset):
    def __init__(self, n: int, seq: int, vocab: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (n, seq), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        ids = self.ids[i]
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}


class StepTimer(TrainerCallback):
    def __init__(self) -> None:
        self.start = 0.0
        self.times: list[float] = []

    def on_step_begin(self, args_, state, control, **kw):
        self.start = time.perf_counter()

    def on_step_end(self, args_, state, control, **kw):
        self.times.append(time.perf_counter() - self.start)


def dataset(args: argparse.Namespace, model) -> RandomIds:
    """Enough random batches for max_steps."""
    return RandomIds(args.max_steps * args.batch * args.grad_accum, args.seq, min(model.config.vocab_size, 32000))


def training_arguments(args: argparse.Namespace, cuda: bool) -> TrainingArguments:
    return TrainingArguments(
        output_dir=args.out, per_device_train_batch_size=args.batch, gradient_accumulation_steps=args.grad_accum,
        learning_rate=2e-4, max_steps=args.max_steps, lr_scheduler_type="cosine", warmup_steps=1, logging_steps=1,
        save_strategy="no", bf16=cuda, optim="paged_adamw_8bit" if cuda else "adamw_torch",
        gradient_checkpointing=cuda, gradient_checkpointing_kwargs={"use_reentrant": False},
        max_grad_norm=0.3, remove_unused_columns=False, report_to="none", use_cpu=not cuda, seed=0,
        disable_tqdm=True, dataloader_num_workers=0,
    )


def main() -> None:
    args = make_parser().parse_args()
    t0 = time.time()
    cuda = torch.cuda.is_available()
    model = load_model(args, cuda)
    t1 = time.time()
    timer = StepTimer()
    callbacks = [timer]
    if args.facts:
        from memfacts import MemFacts

        callbacks.append(MemFacts())
    trainer = Trainer(model=model, args=training_arguments(args, cuda), train_dataset=dataset(args, model),
                      data_collator=default_data_collator, callbacks=callbacks)
    out = trainer.train()
    t2 = time.time()
    tokens_per_step = args.batch * args.grad_accum * args.seq
    kept = timer.times[2:]
    result = {
        "step_times": [round(x, 5) for x in timer.times], "tokens_per_step": tokens_per_step,
        "tokens_per_s_steps3on": round(tokens_per_step * len(kept) / sum(kept), 2) if kept else None,
        "train_runtime": out.metrics.get("train_runtime"), "setup_load_s": round(t1 - t0, 1),
        "train_s": round(t2 - t1, 1),
        "peak_reserved": torch.cuda.max_memory_reserved() if cuda else None,
        "peak_allocated": torch.cuda.max_memory_allocated() if cuda else None,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f)
    print("SEED " + json.dumps(result), flush=True)
    if args.facts:
        from memfacts import print_facts

        callbacks[-1].facts["script_max_memory_allocated"] = result["peak_allocated"]
        print_facts(callbacks[-1])


if __name__ == "__main__":
    main()
