"""A suspend ends the epoch early, and the Trainer then runs the epoch's end: under `save_strategy = "epoch"` it saved
the checkpoint of the step just saved for the suspend a second time (a real tiny run suspended at step 5: two save
phases, two `checkpoint` events of checkpoint-5). The step's checkpoint is written once; a run that is not suspended
still saves at each epoch's end."""

from __future__ import annotations

from pathlib import Path

from loratui import events
from loratui.trainer.callback import ControlState, EventCallback, TokenCounter


class _Data:
    def __init__(self, n: int) -> None:
        import torch

        generator = torch.Generator().manual_seed(0)
        self.rows = [torch.randint(3, 200, (16,), generator=generator) for _ in range(n)]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict[str, object]:
        return {"input_ids": self.rows[i], "labels": self.rows[i].clone()}


def _train(tmp_path: Path, model_cache: Path, suspend_at: int, evaluate: bool = False) -> list[events.AnyEvent]:
    import transformers
    from transformers import AutoModelForCausalLM, Trainer, TrainerCallback, TrainingArguments

    from loratui.trainer.tiny import ensure_tiny_model

    commands = tmp_path / "control.cmds"
    commands.write_text("")
    emitted: list[events.AnyEvent] = []

    class Asks(TrainerCallback):  # what `loratui suspend` appends, read at the next step boundary
        def on_step_begin(self, args: object, state: transformers.TrainerState, control: object, **_: object) -> None:
            if state.global_step + 1 == suspend_at:
                with open(commands, "a") as handle:
                    handle.write("suspend\n")

    callback = EventCallback(emitted.append, ControlState(commands), TokenCounter(), {})
    model = AutoModelForCausalLM.from_pretrained(ensure_tiny_model())
    args = TrainingArguments(output_dir=str(tmp_path / "out"), per_device_train_batch_size=2, num_train_epochs=2,
                             save_strategy="epoch", eval_strategy="epoch" if evaluate else "no",
                             logging_strategy="no", report_to="none", disable_tqdm=True, use_cpu=True)
    Trainer(model=model, args=args, train_dataset=_Data(12), eval_dataset=_Data(4) if evaluate else None,
            callbacks=[Asks(), callback]).train()
    return emitted


def test_a_suspend_saves_its_checkpoint_once(tmp_path: Path, model_cache: Path) -> None:
    emitted = _train(tmp_path, model_cache, suspend_at=4)
    saved = [e.step for e in emitted if isinstance(e, events.Checkpoint)]
    assert saved == [4], saved
    assert [e.edge for e in emitted if isinstance(e, events.Phase) and e.name == "save"] == ["begin", "end"]


def test_epochs_still_save_at_their_end(tmp_path: Path, model_cache: Path) -> None:
    emitted = _train(tmp_path, model_cache, suspend_at=0)  # no suspend
    assert [e.step for e in emitted if isinstance(e, events.Checkpoint)] == [6, 12]


def test_a_suspend_does_not_evaluate_the_epoch_it_cut_short(tmp_path: Path, model_cache: Path) -> None:
    """Under `eval_strategy = "epoch"` a suspend at step 4 of a 6-step epoch ran a whole evaluation (of a partial
    epoch) before the process could leave; the resumed run evaluates at the epoch's real end."""
    emitted = _train(tmp_path, model_cache, suspend_at=4, evaluate=True)
    assert not [e for e in emitted if isinstance(e, events.Phase) and e.name == "eval"]
    assert [e.step for e in emitted if isinstance(e, events.Checkpoint)] == [4]
    (tmp_path / "again").mkdir()
    unsuspended = _train(tmp_path / "again", model_cache, suspend_at=0, evaluate=True)
    assert [e.step for e in unsuspended if isinstance(e, events.Phase) and e.name == "eval" and e.edge == "end"] == \
        [6, 12]
