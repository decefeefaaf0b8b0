"""A user's Trainer script that reports its own view of the process (issue 24 item 2: leave no trace).

Run alone and under `loratui run --`, it must write the same report, but for what loratui documents
(SIGHUP ignored, the hook's variables in the environment). It knows nothing of loratui. Its report (JSON,
to --report) holds, seen during training and after it: torch's peak-memory counters and who reset them,
the RNG streams, logging and warnings configuration, signal handlers, sys.path and sys.meta_path, the
sitecustomize module, stdout/stderr buffering, the working directory, the environment, and the files in
its output_dir. With --gate FILE it waits at the end of step --gate-step until FILE exists (so a test can
send loratui a command at a known step).
"""

import argparse
import hashlib
import json
import logging
import os
import random
import signal
import sys
import time
import warnings

import numpy
import torch
from transformers import AutoModelForCausalLM, Trainer, TrainerCallback, TrainingArguments

parser = argparse.ArgumentParser()
parser.add_argument("--model", required=True)
parser.add_argument("--out", required=True)
parser.add_argument("--report", required=True)
parser.add_argument("--max-steps", type=int, default=6)
parser.add_argument("--save-total-limit", type=int, default=None)
parser.add_argument("--gate", default="")
parser.add_argument("--gate-step", type=int, default=2)
args = parser.parse_args()

RESETS = []
_reset = torch.cuda.reset_peak_memory_stats


def _counting_reset(*a, **k):  # who resets this script's peak counters, and when
    RESETS.append(len(RESETS))
    return _reset(*a, **k)


torch.cuda.reset_peak_memory_stats = _counting_reset
SIGNALS = ["SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGPIPE", "SIGCHLD", "SIGALRM"]


def handler_name(handler):
    if handler is None or handler in (signal.SIG_DFL, signal.SIG_IGN):  # an inherited one reads as an int
        return {signal.SIG_DFL: "SIG_DFL", signal.SIG_IGN: "SIG_IGN"}.get(handler, "None")
    return f"python:{getattr(handler, '__qualname__', type(handler).__name__)}"


def view():
    """What this process sees now."""
    import faulthandler

    cuda = torch.cuda.is_available()
    loggers = {name: (logging.getLogger(name).level, len(logging.getLogger(name).handlers),
                      logging.getLogger(name).propagate, logging.getLogger(name).disabled)
               for name in ("", "transformers", "torch", "peft", "accelerate", "py.warnings")}
    return {
        "memory": {"resets": len(RESETS),
                   "max_memory_allocated": torch.cuda.max_memory_allocated() if cuda else None},
        "rng": {"torch": hashlib.sha256(torch.get_rng_state().numpy().tobytes()).hexdigest(),
                "python": hashlib.sha256(repr(random.getstate()).encode()).hexdigest(),
                "numpy": hashlib.sha256(repr(numpy.random.get_state()).encode()).hexdigest()},
        "logging": {"loggers": loggers, "disable": logging.root.manager.disable,
                    "root_handlers": [type(h).__name__ for h in logging.root.handlers],
                    "capture_warnings": logging._warnings_showwarning is not None},
        "warnings": [repr(f) for f in warnings.filters],
        "signals": {name: handler_name(signal.getsignal(getattr(signal, name))) for name in SIGNALS},
        "faulthandler": faulthandler.is_enabled(),
        "sys_path": list(sys.path),
        "meta_path": [type(f).__name__ for f in sys.meta_path],
        "sitecustomize": getattr(sys.modules.get("sitecustomize"), "__file__", None),
        "stdout": [sys.stdout.line_buffering, sys.stdout.write_through, type(sys.stdout.buffer).__name__],
        "stderr": [sys.stderr.line_buffering, sys.stderr.write_through, type(sys.stderr.buffer).__name__],
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "fds": {fd: _target(fd) for fd in os.listdir("/proc/self/fd")},
    }


def _target(fd):
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # the listing's own descriptor, closed by now
        return None


class Probe(TrainerCallback):
    def __init__(self):
        self.during = None

    def on_step_end(self, args_, state, control, **kwargs):
        if state.global_step == args.gate_step:
            self.during = view()
            while args.gate and not os.path.exists(args.gate):
                time.sleep(0.05)


# The user's own sitecustomize, when the test gives one, put a module on the path; it must still import.
user_module = os.environ.get("PROBE_USER_MODULE")
imported = __import__(user_module).VALUE if user_module else None

torch.manual_seed(0)
model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
ids = torch.randint(0, model.config.vocab_size, (64, 16))
dataset = [{"input_ids": row, "attention_mask": torch.ones_like(row), "labels": row} for row in ids]
training_args = TrainingArguments(
    output_dir=args.out, per_device_train_batch_size=4, logging_steps=1, max_steps=args.max_steps,
    save_steps=args.max_steps, save_total_limit=args.save_total_limit, learning_rate=1e-3, report_to="none",
    use_cpu=True, seed=0, disable_tqdm=True,
)
probe = Probe()
trainer = Trainer(model=model, args=training_args, train_dataset=dataset, callbacks=[probe])
trainer.train()
after = view()
files = sorted(os.path.relpath(os.path.join(root, name), args.out)
               for root, dirs, names in os.walk(args.out) for name in dirs + names)
with open(args.report, "w") as handle:
    json.dump({"during": probe.during, "after": after, "files": files, "user_module": imported}, handle)
print("probe done")
