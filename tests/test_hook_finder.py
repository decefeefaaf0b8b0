"""The hook's finder (trainer/autohook.py) in a real interpreter started as a watched command's is: it patches
transformers' Trainer however the script reaches transformers.trainer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loratui.supervisor.command import HOOK_DIR, ROOT_ENV, RUN_ENV
from tests.conftest import REPO

pytestmark = pytest.mark.slow
ASKS_FIRST = """import importlib.util, json, sys
found = importlib.util.find_spec("transformers.trainer") is not None  # "is the Trainer there?" before using it
import torch
from transformers import Trainer, TrainingArguments
trainer = Trainer(model=torch.nn.Linear(2, 2), args=TrainingArguments(output_dir="out", use_cpu=True, report_to="none"))
print(json.dumps({"found": found, "finders": [type(f).__name__ for f in sys.meta_path],
                  "patched": any(type(c).__name__ == "LoratuiCallback" for c in trainer.callback_handler.callbacks)}))
"""


def _run_hooked(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -c CODE` started as a watched command's Python is (the hook first on PYTHONPATH)."""
    (cwd / "run").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LORATUI_")}
    env.update({RUN_ENV: str(cwd / "run"), ROOT_ENV: str(REPO), "OMP_NUM_THREADS": "1",
                "PYTHONPATH": os.pathsep.join(p for p in (str(HOOK_DIR), str(REPO)) if p)})
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_a_script_that_looks_for_transformers_trainer_before_importing_it_is_still_hooked(tmp_path: Path) -> None:
    """importlib.util.find_spec("transformers.trainer") asked the finder, which wrapped that spec's loader and
    took itself off sys.meta_path; the import that followed made a new spec, so the Trainer was never patched
    (the run recorded no step of its own)."""
    done = _run_hooked(ASKS_FIRST, tmp_path)
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["found"] and seen["patched"] and "PostImportFinder" not in seen["finders"]


WRAPS_INIT = """import json
import torch
from transformers import Trainer, TrainingArguments
calls = []
their_original = Trainer.__init__  # a library's patch made after the import (as unsloth's or a plugin's are)
def their_init(self, *args, **kwargs):
    calls.append("theirs")
    their_original(self, *args, **kwargs)
Trainer.__init__ = their_init
trainer = Trainer(model=torch.nn.Linear(2, 2), args=TrainingArguments(output_dir="out", use_cpu=True, report_to="none"))
Trainer(model=torch.nn.Linear(2, 2), args=TrainingArguments(output_dir="out", use_cpu=True, report_to="none"))
print(json.dumps({"calls": calls, "init_is_theirs": Trainer.__init__ is their_init,
                  "patched": any(type(c).__name__ == "LoratuiCallback" for c in trainer.callback_handler.callbacks)}))
"""


def test_a_trainer_init_wrapped_by_another_library_after_the_import_is_hooked_once(tmp_path: Path) -> None:
    """The Trainer is patched when the first one is built; a library that wrapped Trainer.__init__ before that
    calls the hook's as its original: that must neither loop nor undo their wrapper, and the Trainer is hooked."""
    done = _run_hooked(WRAPS_INIT, tmp_path)
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen == {"calls": ["theirs", "theirs"], "init_is_theirs": True, "patched": True}
