"""A checkpoint saved with `s` is never rotated away (issue 16 item 1): no hidden save_total_limit, and
under a limit the recipe sets, the requested checkpoint is kept outside the Trainer's rotation."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from transformers.trainer_utils import rotate_checkpoints

from loratui.rundir import latest_checkpoint, pin_checkpoint
from loratui.trainer.callback import ControlState, EventCallback, TokenCounter


def _checkpoint(folder: Path, step: int) -> Path:
    path = folder / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "adapter_model.safetensors").write_bytes(b"w" * 64)
    (path / "trainer_state.json").write_text("{}")  # written last: the checkpoint is complete
    return path


def test_a_pinned_checkpoint_survives_the_rotation(tmp_path: Path) -> None:
    kept = pin_checkpoint(_checkpoint(tmp_path, 10))
    for step in (20, 30):
        _checkpoint(tmp_path, step)
    rotate_checkpoints(str(tmp_path), save_total_limit=1)
    assert not (tmp_path / "checkpoint-10").exists()  # the rotation did run
    assert (kept / "adapter_model.safetensors").read_bytes() == b"w" * 64
    assert latest_checkpoint(tmp_path) == str(tmp_path / "checkpoint-30")  # resume is unchanged


def test_the_callback_pins_a_save_the_user_asked_for(tmp_path: Path) -> None:
    commands = tmp_path / "control.cmds"
    commands.write_text("")
    emitted: list[object] = []
    callback = EventCallback(emitted.append, ControlState(commands), TokenCounter(), {})
    args = SimpleNamespace(output_dir=str(tmp_path), save_total_limit=2, should_save=True)
    control = SimpleNamespace(should_save=False, should_training_stop=False)

    def step(n: int, requested: bool) -> None:
        if requested:
            with open(commands, "a") as handle:
                handle.write("save\n")
        state = SimpleNamespace(global_step=n, epoch=0.0)
        callback.on_step_end(args, state, control)
        _checkpoint(tmp_path, n)
        rotate_checkpoints(str(tmp_path), save_total_limit=2)
        callback.on_save(args, state, control)

    step(5, requested=True)
    for n in (10, 15, 20):
        step(n, requested=False)
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-15", "checkpoint-20"]
    assert sorted(p.name for p in (tmp_path / "saved").iterdir()) == ["checkpoint-5"]
    paths = [e.path for e in emitted if type(e).__name__ == "Checkpoint"]  # type: ignore[attr-defined]
    assert paths[0] == str(tmp_path / "saved" / "checkpoint-5") and paths[1] == str(tmp_path / "checkpoint-10")
