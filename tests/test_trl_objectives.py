"""What loratui shows of TRL's preference and RL trainers (DPO, GRPO) is TRL's own truth.

DPO's reference log-probabilities come, under a LoRA adapter, from the same model with the adapter turned off:
a second forward over the same batch, under `torch.no_grad()`. Those tokens are scored, not trained on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from loratui.trainer.callback import TokenCounter
from tests.conftest import REPO, kinds, only_run
from tests.test_watch_runs import ENV, SCRIPTS, model_dir, watch_dir  # noqa: F401  (fixtures)


class _Model(torch.nn.Module):
    """A model's forward signature: input_ids and attention_mask as keywords."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(16, 4)

    def forward(self, input_ids: Any = None, attention_mask: Any = None) -> Any:
        return self.embed(input_ids)


def test_a_forward_without_gradients_is_not_counted_as_trained_tokens() -> None:
    model = _Model().train()
    counter = TokenCounter(on_host=True)
    model.register_forward_pre_hook(counter.hook, with_kwargs=True)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    ids = torch.ones(2, 4, dtype=torch.long)
    model(input_ids=ids, attention_mask=mask)  # the policy's forward: 5 tokens trained on
    with torch.no_grad():
        model(input_ids=ids, attention_mask=mask)  # DPO's reference forward (adapter disabled)
    assert counter.read() == (5, 5)


@pytest.mark.slow
def test_dpo_tokens_are_the_ones_trl_counts(model_dir: Path, watch_dir: Path,  # noqa: F811
                                            tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "loratui", "run", "--headless", "--runs-dir", str(watch_dir), "--",
                             sys.executable, str(SCRIPTS / "trl_dpo.py"), "--model", str(model_dir),
                             "--out", str(tmp_path / "out"), "--max-steps", "4"],
                            cwd=REPO, env=ENV, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    run = only_run(watch_dir)
    trl_counts = {int(e["step"]): e["values"]["num_tokens"] for e in kinds(run, "log")  # type: ignore[index]
                  if "num_tokens" in e["values"]}  # type: ignore[operator]
    ours = {int(e["step"]): e["tokens_seen"] for e in kinds(run, "step")}  # type: ignore[arg-type]
    assert sorted(trl_counts) == [1, 2, 3, 4]
    assert {step: ours[step] for step in trl_counts} == trl_counts
