"""What a memory estimate must know, read from inside a training script (a bench helper, not loratui).

`MemFacts` is a `TrainerCallback` a bench script adds to its own Trainer: at train begin it records the dtypes of
the embeddings, the LM head and the trainable parameters, whether the model's forward was replaced (TRL's fused LM
head) and whether checkpointing is on; the first batch's shape; torch's allocated bytes at the start of step 3
(weights, LoRA, gradients, optimizer state); and at the end torch's own peaks. `print_facts` prints them as one
`FACTS {json}` line, so the device call's logs say what the estimate should have modelled.
"""

from __future__ import annotations

import json

import torch
from transformers import TrainerCallback


def _dtype(module) -> str | None:
    weight = getattr(module, "weight", None)
    return None if weight is None else str(weight.dtype).removeprefix("torch.")


class MemFacts(TrainerCallback):
    def __init__(self) -> None:
        self.facts: dict = {}
        self._hook = None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        trainable = [p for p in model.parameters() if p.requires_grad]
        forward = base.__dict__.get("forward")
        self.facts.update(
            embed=_dtype(base.get_input_embeddings()), lm_head=_dtype(base.get_output_embeddings()),
            trainable=sum(p.numel() for p in trainable),
            trainable_dtype=str(trainable[0].dtype).removeprefix("torch.") if trainable else None,
            forward_patched=None if forward is None else getattr(getattr(forward, "__func__", forward),
                                                                 "__code__", None).co_name,
            checkpointing=bool(getattr(base, "is_gradient_checkpointing", False)),
            optim=str(args.optim), trainer_peak_start=torch.cuda.max_memory_allocated() if torch.cuda.is_available()
            else None)
        self._hook = model.register_forward_pre_hook(self._shape, with_kwargs=True)

    def _shape(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is not None:
            self.facts["batch_shape"] = list(ids.shape)
            self.facts["batch_keys"] = sorted(kwargs)
        self._hook.remove()

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == 2 and torch.cuda.is_available():
            self.facts["allocated_step3_begin"] = torch.cuda.memory_allocated()

    def on_train_end(self, args, state, control, **kwargs):
        if torch.cuda.is_available():
            self.facts.update(max_allocated=torch.cuda.max_memory_allocated(),
                              max_reserved=torch.cuda.max_memory_reserved())


def print_facts(facts: MemFacts) -> None:
    print("FACTS " + json.dumps(facts.facts), flush=True)
