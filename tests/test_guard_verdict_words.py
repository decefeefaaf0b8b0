"""The guard verdict on a NaN that came back says what it counted (trial 14, the README's guarded NaN demo: "loss
not finite again after the resume (1 of 4 logged)", after a restart from the start, not a resume)."""

from __future__ import annotations

from loratui.logic.guard_verdict import Expectation, judge


def test_a_nan_that_came_back_is_counted_in_words() -> None:
    expect = Expectation(kind="nan", resume_step=0, resume_loss=None, warn_gib=30.0, steps=5,
                         losses=[6.57, 6.56, 6.1, float("nan")], bad_step=4, last_step=5)
    verdict = judge(expect, life_peak=0, gpu=False)
    assert not verdict.recovered
    assert "the loss was not finite again after the restart (1 of the 4 losses logged since)" in verdict.evidence
