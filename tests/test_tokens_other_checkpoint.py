"""A NEW run directory resumed from another run's checkpoint carries the tokens seen (trial 11: its count started
at 0 at step 40, as if no token had been trained on): from that run's log when the checkpoint is a loratui run's,
else from the checkpoint's trainer_state.json (`num_input_tokens_seen`, when the Trainer recorded it), else it says
the count starts at the resume."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from loratui import events
from loratui.eventlog import EventWriter
from loratui.trainer.callback import ControlState, EventCallback, TokenCounter


def _old_run(runs: Path) -> Path:
    """A loratui run that trained steps 1..40 (100 tokens a step) and saved checkpoint-40."""
    old = runs / "20261205-140000-tiny"
    (old / "checkpoints" / "checkpoint-40").mkdir(parents=True)
    log = EventWriter(old / "events.jsonl")
    for step in range(1, 41):
        log.write(events.Step(t=float(step), step=step, epoch=0.1, step_time=1.0, tokens=100, tokens_seen=100 * step))
    log.close()
    return old / "checkpoints" / "checkpoint-40"


def _resume(new_run: Path, checkpoint: Path | None, state_seen: int = 0) -> tuple[int, list[str]]:
    """The new run's trainer beginning at step 40 from `checkpoint`: (its total after one 50-token step, notices)."""
    new_run.mkdir(parents=True, exist_ok=True)
    EventWriter(new_run / "events.jsonl").close()
    emitted: list[events.AnyEvent] = []
    tokens = TokenCounter()
    callback = EventCallback(emitted.append, ControlState(), tokens, {}, log_path=new_run / "events.jsonl",
                             resume_from=str(checkpoint) if checkpoint else None)
    state = SimpleNamespace(global_step=40, max_steps=80, epoch=0.1, num_input_tokens_seen=state_seen)
    callback.on_train_begin(SimpleNamespace(num_train_epochs=1.0), state, SimpleNamespace())
    tokens.carry(50)  # what the first step after the resume trains on
    return tokens.read()[1], [e.message for e in emitted if isinstance(e, events.Notice)]


def test_a_loratui_runs_checkpoint_carries_that_runs_count(tmp_path: Path) -> None:
    checkpoint = _old_run(tmp_path / "runs")
    total, said = _resume(tmp_path / "runs" / "20261205-150000-tiny-fix", checkpoint)
    assert total == 4050, total
    assert said == [("tokens seen: 4,000 carried from run 20261205-140000-tiny's log at step 40, the run whose "
                     "checkpoint this one resumes")], said


def test_a_foreign_checkpoint_carries_its_trainer_state_count(tmp_path: Path) -> None:
    checkpoint = tmp_path / "elsewhere" / "checkpoint-40"
    checkpoint.mkdir(parents=True)
    total, said = _resume(tmp_path / "runs" / "new", checkpoint, state_seen=3900)
    assert total == 3950 and "3,900 carried from the checkpoint's trainer_state.json" in said[0], (total, said)


def test_no_count_anywhere_says_it_starts_at_the_resume(tmp_path: Path) -> None:
    checkpoint = tmp_path / "elsewhere" / "checkpoint-40"
    checkpoint.mkdir(parents=True)
    total, said = _resume(tmp_path / "runs" / "new", checkpoint)
    assert total == 50 and said[0].startswith("tokens seen: counted from this resume at step 40"), (total, said)


def test_a_resume_within_the_run_reads_its_own_log_and_says_nothing(tmp_path: Path) -> None:
    checkpoint = _old_run(tmp_path / "runs")
    run = checkpoint.parent.parent
    emitted: list[events.AnyEvent] = []
    tokens = TokenCounter()
    callback = EventCallback(emitted.append, ControlState(), tokens, {}, log_path=run / "events.jsonl",
                             resume_from=str(checkpoint))
    callback.on_train_begin(SimpleNamespace(num_train_epochs=1.0),
                            SimpleNamespace(global_step=40, max_steps=80, epoch=0.1, num_input_tokens_seen=999),
                            SimpleNamespace())
    assert tokens.read()[1] == 4000 and not [e for e in emitted if isinstance(e, events.Notice)]
