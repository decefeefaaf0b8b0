"""A run that ended with no traceback shows its last printed lines as evidence; Python's warnings are no evidence
(trial 7: a SIGKILLed tiny run's advice quoted `  warnings.warn(` and a FutureWarning from modeling_utils.py)."""

from __future__ import annotations

from loratui import events
from loratui.logic.advisor.failure import ended_advice


def test_warnings_printed_before_a_kill_are_not_its_evidence() -> None:
    tail = ["{'loss': 2.31, 'grad_norm': 0.93, 'learning_rate': 0.0002, 'epoch': 0.5}",
            "/usr/lib/python3/site-packages/transformers/modeling_utils.py:3314: FutureWarning: `torch_dtype` is "
            "deprecated! Use `dtype` instead!",
            "  warnings.warn(",
            "/x/peft/tuners/lora/bnb.py:77: UserWarning: Merge lora module to 4-bit linear may get different "
            "generations due to rounding errors."]
    end = events.End(t=1.0, state=events.FAILED, step=50, signal="SIGKILL")
    advice = ended_advice(end, tail)
    assert advice.title == "The trainer was killed by SIGKILL at step 50"
    assert not any("Warning" in line or "warnings.warn" in line for line in advice.evidence), advice.evidence
    assert any("'loss': 2.31" in line for line in advice.evidence), advice.evidence
