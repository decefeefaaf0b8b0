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
from transformers import Trainer
print(json.dumps({"found": found, "patched": bool(getattr(Trainer, "_loratui_patched", False)),
                  "finders": [type(f).__name__ for f in sys.meta_path]}))
"""


def test_a_script_that_looks_for_transformers_trainer_before_importing_it_is_still_hooked(tmp_path: Path) -> None:
    """importlib.util.find_spec("transformers.trainer") asked the finder, which wrapped that spec's loader and
    took itself off sys.meta_path; the import that followed made a new spec, so the Trainer was never patched
    (the run recorded no step of its own)."""
    (tmp_path / "run").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LORATUI_")}
    env.update({RUN_ENV: str(tmp_path / "run"), ROOT_ENV: str(REPO), "OMP_NUM_THREADS": "1",
                "PYTHONPATH": os.pathsep.join(p for p in (str(HOOK_DIR), str(REPO)) if p)})
    done = subprocess.run([sys.executable, "-c", ASKS_FIRST], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["found"] and seen["patched"] and "PostImportFinder" not in seen["finders"]
