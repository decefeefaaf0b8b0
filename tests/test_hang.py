"""Hang detection on scripted events: no step for N x the median interval with an idle GPU."""

from __future__ import annotations

from loratui import events
from loratui.logic.advisor import Advisor
from loratui.logic.hang import HangWatch, describe


def _training(watch: HangWatch, steps: int = 10, util: int | None = 0) -> float:
    watch.feed(events.State(t=0.0, state="training"))
    for i in range(1, steps + 1):
        watch.feed(events.Step(t=float(i), step=i, epoch=0.0, step_time=0.5))
    watch.feed(events.Sample(t=float(steps), gpu=0, used_max=1, used_last=1, used_min=1, total=2, util=util,
                             run_pids=[1]))
    return float(steps)


def test_silence_past_the_limit_with_an_idle_gpu_is_a_hang_once() -> None:
    watch = HangWatch(factor=10, min_s=5)
    last = _training(watch)
    assert watch.check(last + 9.9) is None
    hang = watch.check(last + 10.5)
    assert hang is not None and hang.step == 10 and hang.median_s == 1.0 and hang.util == 0
    assert "no step for 10 s after step 10" in describe(hang)
    assert watch.check(last + 20) is None  # said once per silence
    watch.feed(events.Step(t=last + 21, step=11, epoch=0.0, step_time=0.5))
    assert watch.check(last + 21 + 30) is not None  # a new step re-arms it


def test_the_floor_and_a_busy_gpu_hold_it_back() -> None:
    watch = HangWatch(factor=10, min_s=60)
    last = _training(watch)
    assert watch.check(last + 30) is None  # 30x the median, but under the 60 s floor
    busy = HangWatch(factor=10, min_s=5)
    last = _training(busy, util=97)
    assert busy.check(last + 100) is None  # a very long step, not a hang


def test_pauses_evals_and_too_few_steps_are_not_hangs() -> None:
    watch = HangWatch(factor=10, min_s=5)
    last = _training(watch)
    watch.feed(events.State(t=last, state="paused"))
    assert watch.check(last + 100) is None
    evaluating = HangWatch(factor=10, min_s=5)
    last = _training(evaluating)
    evaluating.feed(events.Phase(t=last, name="eval", edge="begin"))
    assert evaluating.check(last + 100) is None
    young = HangWatch(factor=10, min_s=5)
    last = _training(young, steps=2)
    assert young.check(last + 100) is None


def test_the_supervisors_hung_notice_becomes_advice() -> None:
    adv = Advisor()
    adv.feed(events.Notice(t=1.0, level="error", key="hung", message="no step for 600 s after step 7"))
    (item,) = adv.items()
    assert item.id == "run_hung" and "loratui stacks" in " ".join(item.evidence)
