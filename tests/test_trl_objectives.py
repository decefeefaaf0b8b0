"""What loratui records of a TRL script (SFT, DPO, GRPO; tests/data/scripts/trl_*.py) is TRL's own truth, and the
script's process is its own.

DPO's reference log-probabilities come, under a LoRA adapter, from the same model with the adapter turned off:
a second forward over the same batch, under `torch.no_grad()`. Those tokens are scored, not trained on. TRL's
trainers other than SFTTrainer train on other forwards than the one the estimate models, so they get no figure."""

from __future__ import annotations

import json
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


def _watch(runs: Path, script: str, model: Path, out: Path, steps: int) -> Path:
    """`loratui run --headless -- python SCRIPT`, to its end; the run's directory."""
    result = subprocess.run([sys.executable, "-m", "loratui", "run", "--headless", "--runs-dir", str(runs), "--",
                             sys.executable, str(SCRIPTS / script), "--model", str(model), "--out", str(out),
                             "--max-steps", str(steps)],
                            cwd=REPO, env=ENV, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return only_run(runs)


def _tokens(run: Path) -> tuple[dict[int, object], dict[int, object]]:
    """(TRL's logged num_tokens, loratui's tokens_seen) by step, at the steps TRL logged."""
    trl_counts = {int(e["step"]): e["values"]["num_tokens"] for e in kinds(run, "log")  # type: ignore[index]
                  if "num_tokens" in e["values"]}  # type: ignore[operator]
    ours = {int(e["step"]): e["tokens_seen"] for e in kinds(run, "step")}  # type: ignore[arg-type]
    return trl_counts, {step: ours.get(step) for step in trl_counts}


def _estimate_notices(run: Path) -> list[str]:
    return [str(e["message"]) for e in kinds(run, "notice") if "estimate" in str(e["message"])]


@pytest.mark.slow
def test_dpo_tokens_are_trls_and_no_estimate_models_it_as_sft(model_dir: Path, watch_dir: Path,  # noqa: F811
                                                               tmp_path: Path) -> None:
    run = _watch(watch_dir, "trl_dpo.py", model_dir, tmp_path / "out", 4)
    trl_counts, ours = _tokens(run)
    assert sorted(trl_counts) == [1, 2, 3, 4] and ours == trl_counts
    # DPO's batch is each pair's chosen and rejected completions, plus a reference forward: not SFT's memory
    assert not kinds(run, "estimate")
    assert any("no VRAM estimate: DPOTrainer" in text for text in _estimate_notices(run)), _estimate_notices(run)


@pytest.mark.slow
def test_grpo_tokens_are_trls_and_its_loss_near_zero_is_no_problem(model_dir: Path, watch_dir: Path,  # noqa: F811
                                                                    tmp_path: Path) -> None:
    run = _watch(watch_dir, "trl_grpo.py", model_dir, tmp_path / "out", 6)
    trl_counts, ours = _tokens(run)
    assert sorted(trl_counts) == list(range(1, 7)) and ours == trl_counts
    assert not kinds(run, "estimate")  # it generates its completions first: not SFT's memory either
    assert any("no VRAM estimate: GRPOTrainer" in text for text in _estimate_notices(run)), _estimate_notices(run)
    # GRPOConfig has no max_length: the live settings carry the length it has, for the OOM's length move
    assert [e["lengths"] for e in kinds(run, "settings")] == [{"GRPOConfig.max_completion_length": 16}]


LORATUI_MODULES = ("loratui", "msgspec", "platformdirs")
"""What a hooked Trainer's process loads of loratui's: its callback and the packages it declares."""


@pytest.mark.slow
def test_a_watched_trl_script_holds_what_it_holds_alone(model_dir: Path, watch_dir: Path,  # noqa: F811
                                                         tmp_path: Path) -> None:
    """argv, working directory, environment (but the hook's documented variables), open descriptors (but the
    run's log while it trains, which its children do not inherit) and modules (but loratui's own) are the
    script's."""
    work = tmp_path / "work"
    work.mkdir()
    command = [sys.executable, str(SCRIPTS / "trl_probe.py"), "--model", str(model_dir), "--out", "out"]
    alone = subprocess.run([*command, "--report", str(tmp_path / "alone.json")], cwd=work, env=ENV,
                           capture_output=True, text=True, timeout=600, check=False)
    assert alone.returncode == 0, alone.stderr[-2000:]
    watched = subprocess.run([sys.executable, "-m", "loratui", "run", "--headless", "--runs-dir", str(watch_dir),
                              "--", *command, "--report", str(tmp_path / "watched.json")], cwd=work, env=ENV,
                             capture_output=True, text=True, timeout=600, check=False)
    assert watched.returncode == 0, watched.stdout[-2000:]
    run = only_run(watch_dir)
    trl_counts, ours = _tokens(run)  # and its tokens are the ones SFTTrainer counts
    assert sorted(trl_counts) == [1, 2, 3] and ours == trl_counts
    reports = [json.loads((tmp_path / f"{name}.json").read_text()) for name in ("alone", "watched")]
    for when in ("during", "after"):
        seen_alone, seen_watched = (report[when] for report in reports)
        assert seen_alone["argv"] == seen_watched["argv"] and seen_alone["cwd"] == seen_watched["cwd"]
        env = {k: v for k, v in seen_watched["env"].items() if not k.startswith("LORATUI_") and k != "PYTHONPATH"}
        assert env == {k: v for k, v in seen_alone["env"].items() if k != "PYTHONPATH"}
        extra = [fd for fd in seen_watched["fds"].values() if fd not in seen_alone["fds"].values()]
        # the run's log while it trains; after train(), nothing (it was held to the process's exit)
        assert extra == ([[str((run / "events.jsonl").resolve()), False]] if when == "during" else []), when
        assert not set(seen_alone["modules"]) - set(seen_watched["modules"])
        added = set(seen_watched["modules"]) - set(seen_alone["modules"])
        assert added and all(name.split(".")[0] in LORATUI_MODULES for name in added), sorted(added)


def test_a_dpo_trainer_of_another_library_gets_no_sft_figure(tmp_path: Path, model_cache: Path) -> None:
    """LLaMA-Factory's and axolotl's DPO trainers subclass TRL's DPOTrainer with a compute_loss of their own: the
    batch is still each pair's chosen and rejected completions, with a reference forward."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    from loratui.trainer.runtime import read_runtime
    from loratui.trainer.tiny import ensure_tiny_model

    class CustomDPOTrainer(DPOTrainer):  # as llamafactory/train/dpo/trainer.py declares it
        def compute_loss(self, model: Any, inputs: Any, return_outputs: bool = False, **kwargs: Any) -> Any:
            return super().compute_loss(model, inputs, return_outputs, **kwargs)

    CustomDPOTrainer.__module__ = CustomDPOTrainer.compute_loss.__module__ = "llamafactory.train.dpo.trainer"
    rows = [{"prompt": f"Question {i}?", "chosen": " Yes.", "rejected": " No."} for i in range(4)]
    args = DPOConfig(output_dir=str(tmp_path / "out"), max_steps=1, report_to="none", use_cpu=True,
                     save_strategy="no")
    trainer = CustomDPOTrainer(model=AutoModelForCausalLM.from_pretrained(ensure_tiny_model()), args=args,
                               train_dataset=Dataset.from_list(rows),
                               processing_class=AutoTokenizer.from_pretrained(ensure_tiny_model()))
    runtime, why = read_runtime(trainer, trainer.model)
    assert runtime == {} and why is not None and why.startswith("CustomDPOTrainer (TRL's DPOTrainer) scores"), why


def test_a_length_assumed_without_max_length_says_so() -> None:
    """GRPO's prompts are tokenised as it trains and GRPOConfig has no max_length: the 1024 is loratui's guess."""
    from datasets import Dataset
    from trl import GRPOConfig

    from loratui.trainer.preflight import longest_example

    prompts = Dataset.from_dict({"prompt": ["Question 1: what is 1 plus 1? Answer:"]})
    args = GRPOConfig(output_dir="unused", report_to="none", use_cpu=True)
    seq_len, max_length, how = longest_example(args, prompts)
    assert (seq_len, max_length) == (1024, None)
    assert how == "no tokenised dataset to measure and no max_length set: assumed 1024", how
