"""An ended run's tokens/s: attach, replay and the headless line showed the rate of its last 20 steps unlabelled, as
if it were still running (a real tiny run's save step took 5.7 s against 0.3 s for the others: any window holding it
read a third of the run's rate). An ended run shows its own average, labelled `avg tok/s`: every token it stepped
over the time its steps took; a running one its recent steps' rate, as before."""

from __future__ import annotations

from loratui import events
from loratui.logic.runstate import RunState
from loratui.logic.text_reader import TextReader
from loratui.tui.headless import progress_line


def _run(end: bool) -> RunState:
    state = RunState()
    found: list[events.AnyEvent] = [events.TrainBegin(t=0, max_steps=120, num_epochs=1.0),
                                    events.State(t=0, state=events.TRAINING)]
    for step in range(1, 121):  # 200 tokens a step at 0.1 s (2000 tok/s); the last steps save and evaluate
        found.append(events.Step(t=step, step=step, epoch=step / 120, step_time=5.0 if step in (110, 120) else 0.1,
                                 tokens=200, tokens_seen=200 * step))
    if end:
        found.append(events.End(t=200, state=events.FINISHED, exit_code=0, step=120))
    for event in found:
        state.feed(event)
    return state


def test_an_ended_runs_rate_is_its_own_average_and_says_so() -> None:
    ended = progress_line(_run(end=True))
    average = 120 * 200 / (118 * 0.1 + 2 * 5.0)  # 1101 tok/s over the run
    assert f"avg tok/s {average:.0f}" in ended, ended
    live = progress_line(_run(end=False))
    assert "avg" not in live and "tok/s 339" in live, live  # 20 steps, 2 of them at 5 s: what the run does lately


def test_loratuis_own_finished_line_is_no_loss_line() -> None:
    """A headless printout pasted into `doctor`: the finished line repeats the last loss (`avg tok/s` now)."""
    reader = TextReader()
    lines = ["training  [####----] step 10/20  loss 2.5000  tok/s 90  VRAM no GPU  ETA 1m",
             "finished  [########] step 20/20  loss 2.5000  avg tok/s 88  VRAM no GPU  ETA --"]
    logs = [e for line in lines for e in reader.feed(line) if isinstance(e, events.Log)] + \
        [e for e in reader.close() if isinstance(e, events.Log)]
    assert len(logs) == 1, logs
