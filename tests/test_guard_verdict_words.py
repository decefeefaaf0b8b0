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


def test_a_nan_that_comes_back_past_the_bad_step_is_not_recovered() -> None:
    """Trial 14: a NaN at step 4, restarted from the start at a lower learning rate; the verdict "recovered" was
    given at step 5's record, just before step 5's loss logged NaN (the away card: "loss not finite", then
    "guard verdict: recovered")."""
    from loratui import events
    from loratui.recipe import Recipe
    from loratui.supervisor.watch import RunWatch

    written: list[object] = []
    watch = RunWatch("r", Recipe(), written.append)
    watch.expect_after_restart(Expectation("nan", resume_step=0, resume_loss=None, warn_gib=None, bad_step=4))
    for step in range(1, 6):
        watch.feed([events.Step(t=float(step), step=step, epoch=0.0, step_time=1.0),
                    events.Log(t=step + 0.5, step=step, values={"loss": 6.5 if step < 5 else "NaN"})])
    said = [getattr(e, "message", "") for e in written if getattr(e, "key", "") == "guard_verdict"]
    assert len(said) == 1 and said[0].startswith("guard verdict: NOT recovered"), said
