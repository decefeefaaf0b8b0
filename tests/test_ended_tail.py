"""A run that ended with no traceback shows its last printed lines as evidence; Python's warnings are no evidence
(trial 7: a SIGKILLed tiny run's advice quoted `  warnings.warn(` and a FutureWarning from modeling_utils.py).
A SIGKILL's evidence is only what bears on the kill: the kill itself, the OOM killer, memory (polish 10: a
newcomer's SIGKILLed run listed its last loss dict and checkpoint lines, which say nothing of why)."""

from __future__ import annotations

from loratui import events
from loratui.logic.advisor.failure import ended_advice

WARNINGS = ["/usr/lib/python3/site-packages/transformers/modeling_utils.py:3314: FutureWarning: "
            "`torch_dtype` is deprecated! Use `dtype` instead!",
            "  warnings.warn(",
            "/x/peft/tuners/lora/bnb.py:77: UserWarning: Merge lora module to 4-bit linear may get different "
            "generations due to rounding errors."]
UNRELATED = ["{'loss': 2.31, 'grad_norm': 0.93, 'learning_rate': 0.0002, 'epoch': 0.5}",
             "Saving model checkpoint to out/checkpoint-50",
             " 17%|█▋        | 50/300 [00:21<01:47,  2.33it/s]"]


def test_warnings_printed_before_a_kill_are_not_its_evidence() -> None:
    end = events.End(t=1.0, state=events.FAILED, step=50, signal="SIGKILL")
    advice = ended_advice(end, UNRELATED[:1] + WARNINGS)
    assert advice.title == "The trainer was killed by SIGKILL at step 50"
    assert not any("Warning" in line or "warnings.warn" in line for line in advice.evidence), advice.evidence


def test_a_sigkills_evidence_is_only_the_lines_that_bear_on_it() -> None:
    end = events.End(t=1.0, state=events.FAILED, step=50, signal="SIGKILL",
                     error="the command was killed by SIGKILL\n" + "\n".join(UNRELATED))
    oom = "[ 8123.441] Out of memory: Killed process 4242 (python) total-vm:81234567kB, anon-rss:62345678kB"
    advice = ended_advice(end, UNRELATED + [oom] + WARNINGS)
    assert oom in advice.evidence and "the command was killed by SIGKILL" in advice.evidence
    assert not any(line in advice.evidence for line in UNRELATED), advice.evidence
    assert advice.evidence[-1].startswith("next: ") and "out-of-memory killer" in advice.evidence[-1]


def test_a_sigkill_with_nothing_on_it_says_no_more_than_the_kill() -> None:
    end = events.End(t=1.0, state=events.FAILED, step=50, signal="SIGKILL", error="\n".join(UNRELATED))
    advice = ended_advice(end, UNRELATED)
    assert not any(line in advice.evidence for line in UNRELATED), advice.evidence
    assert advice.evidence[:-1] == ["its last output lines say nothing of the kill or of memory"], \
        advice.evidence


def test_an_exit_code_keeps_its_last_lines() -> None:
    """Not a kill: the last lines are what the trainer said before it exited, the only evidence there is."""
    end = events.End(t=1.0, state=events.FAILED, step=50, exit_code=1, error="bad things happened")
    advice = ended_advice(end, UNRELATED)
    assert advice.evidence[0] == "bad things happened" and UNRELATED[0] in advice.evidence
