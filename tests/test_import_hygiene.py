"""The pure and viewer-side modules must not drag in heavy libraries (start-up time, CPU-only boxes)."""

from __future__ import annotations

import subprocess
import sys

import pytest

LIGHT = ["loratui.events", "loratui.eventlog", "loratui.recipe", "loratui.rundir", "loratui.supervisor.gpu",
         "loratui.supervisor.sampler", "loratui.supervisor.control", "loratui.logic.runstate",
         "loratui.logic.series", "loratui.logic.advisor", "loratui.logic.estimate", "loratui.cli"]


@pytest.mark.parametrize("module", LIGHT)
def test_no_torch_or_textual(module: str) -> None:
    code = (f"import sys, {module}; heavy = [m for m in ('torch', 'transformers', 'textual', 'peft') "
            "if m in sys.modules]; print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
