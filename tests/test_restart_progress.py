"""After the guard restarts a run from a checkpoint, the progress line showed the failed life's step until the new
attempt's first step (a real NaN run restarted from checkpoint-8 printed `loading [####] step 12/12`). The guard's
`starting` state names the checkpoint's step, and the views show the new attempt's."""

from __future__ import annotations

from loratui import events
from loratui.logic.runstate import RunState
from loratui.tui.headless import progress_line


def test_the_progress_line_shows_the_new_attempts_step_after_a_guard_restart() -> None:
    state = RunState().feed_all([events.TrainBegin(t=0, max_steps=12, num_epochs=1.0),
                                 events.State(t=0, state=events.TRAINING)] +
                                [events.Step(t=n, step=n, epoch=0.0, step_time=0.1) for n in range(1, 13)])
    assert "step 12/12" in progress_line(state)
    state.feed_all([events.State(t=20, state=events.STARTING, step=8,
                                 reason="guard: restarting from runs/x/checkpoints/checkpoint-8"),
                    events.State(t=21, state=events.LOADING, reason="loading model and data")])
    assert "step 8/12" in progress_line(state), progress_line(state)
    state.feed_all([events.TrainBegin(t=22, max_steps=12, num_epochs=1.0, start_step=8),
                    events.State(t=22, state=events.TRAINING, step=8)])
    assert "step 8/12" in progress_line(state)


def test_a_checkpoints_step_is_read_from_its_name() -> None:
    from loratui.rundir import checkpoint_step

    assert checkpoint_step("/runs/x/checkpoints/checkpoint-8") == 8
    assert checkpoint_step(None) == 0  # restarted from the start
    assert checkpoint_step("/somewhere/final") is None
