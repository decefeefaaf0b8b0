"""`[guard]`: opt-in recovery by the supervisor, within a budget of `max_actions` a run.

On an OOM it applies the advisor's memory move (the top one predicted to fit, which keeps the effective
batch) and restarts from the last checkpoint, or from the start when there is none. On a NaN/Inf or
diverging loss it stops the trainer and restarts from the last checkpoint before the first bad step with
the NaN advice's own move where it names one other than the rate (8-bit optimizer, fp16, float16 weights), else
the learning rate halved (checkpoints from the bad stretch are set aside as `discarded-checkpoint-N`).
Each action writes the changed recipe beside the original as the app's `A` does, becomes the run's recipe,
is recorded in the log as a `guard` notice (replay shows it), and is alerted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loratui import events
from loratui.errors import ApplyError
from loratui.logic.advisor import Advisor
from loratui.logic.advisor.oom_advice import ran_out
from loratui.rundir import RunDir, checkpoint_complete, replace_file, seal
from loratui.supervisor.restart import write_fixed_recipe

GUARD_KEY = "guard"


@dataclass(frozen=True)
class Action:
    """What the guard will do: why, the recipe change, and where training restarts."""

    kind: str  # "oom" | "nan" | "divergence"
    advice_id: str
    why: str
    change: dict[str, Any]
    bad_step: int = 0  # first bad step of a NaN/divergence (checkpoints at or after it are discarded)


@dataclass
class Guard:
    """Decides and applies recovery actions for one run."""

    run: RunDir
    config: Any  # recipe.GuardSection
    write: Callable[[events.AnyEvent], None]
    used: int = 0
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.used = count_actions(self.run.events)  # a re-adopted run keeps its spent budget

    def left(self) -> int:
        return max(0, self.config.max_actions - self.used) if self.config.enabled else 0

    def after_failure(self, advisor: Advisor) -> Action | None:
        """An action for a trainer that just failed (an OOM), or None."""
        if not self.left() or not self.config.on_oom or advisor.oom is None:
            return None
        for advice in advisor.items():
            if advice.id.startswith("oom") and advice.change:
                return Action("oom", advice.id, f"{ran_out(advisor.oom.facts['report'])} after step {advisor.oom.step}",
                              dict(advice.change))
        return self._refuse("an OOM with no recipe move to apply (another process holds the card?)")

    def on_bad_loss(self, advisor: Advisor, learning_rate: float) -> Action | None:
        """An action for a NaN/Inf or diverging loss seen while training, or None."""
        if not self.left() or not self.config.on_nan:
            return None
        nan, diverging = advisor.found.get("nan_loss"), advisor.found.get("loss_diverging")
        if nan is not None:
            kind, bad, why = "nan", nan.step, f"{nan.facts['what']} became {nan.facts['value']} at step {nan.step}"
        elif diverging is not None:
            bad = int(diverging.facts.get("best_step", diverging.step)) + 1
            kind, why = "divergence", f"loss rising from {diverging.facts['best']:.3g} at step {bad - 1}"
        else:
            return None
        change = _nan_move(advisor) if kind == "nan" else {}
        change = change or {"training.learning_rate": float(f"{learning_rate / 2:.3g}")}
        return Action(kind, "nan_loss" if kind == "nan" else "loss_diverging", why, change, bad)

    def apply(self, action: Action) -> tuple[Path, dict[str, str], str | None]:
        """Write the changed recipe (beside the original, and as the run's recipe); returns its path, the
        environment it asks for, and the checkpoint to resume from."""
        fixed, env = write_fixed_recipe(self.run, action.advice_id, action.change)
        # A new file renamed over the copy (never written through a link), sealed again: the run's own change.
        replace_file(self.run.recipe, fixed.read_bytes())
        seal(self.run)
        if action.bad_step:
            discard_from(self.run.checkpoints, action.bad_step)
        resume = latest_before(self.run.checkpoints, action.bad_step or None)
        self.used += 1
        changed = ", ".join(f"{k} = {v!r}" for k, v in action.change.items())
        where = f"from {Path(resume).name}" if resume else "from the start (no checkpoint yet)"
        self.write(events.Notice(
            t=time.time(), level="warning", key=GUARD_KEY,
            message=f"guard action {self.used} of {self.config.max_actions} ({action.kind}: {action.why}): "
                    f"{changed}; restarting {where}; recipe written to {fixed}"))
        return fixed, env, resume

    def _refuse(self, why: str) -> None:
        if why not in self.notes:
            self.notes.append(why)
            self.write(events.Notice(t=time.time(), level="info", key="guard_skip", message=f"guard: {why}"))
        return None


def _nan_move(advisor: Advisor) -> dict[str, Any]:
    """The NaN advice's own move where it is not the learning rate (an 8-bit optimizer, fp16 to bf16, float16
    weights with no mixed precision: a lower rate NaNs again there, each restart burning one of the budget's actions,
    as a newcomer's guarded NaN demo did), else {} (the guard halves the rate, its own step for a NaN)."""
    advice = next((item for item in advisor.items() if item.id == "nan_loss" and item.change), None)
    if advice is None or set(advice.change) <= {"training.learning_rate"}:
        return {}
    return dict(advice.change)


def count_actions(log: Path) -> int:
    """Guard actions already recorded in `log` (its notices carry the key)."""
    return count_notices(log, GUARD_KEY)


def count_notices(log: Path, key: str) -> int:
    """Notices with `key` already recorded in `log` (a re-adopted run keeps its spent budgets)."""
    needle = f'"key":"{key}"'.encode()
    try:
        with open(log, "rb") as handle:
            return sum(1 for line in handle if needle in line and b'"kind":"notice"' in line)
    except OSError:
        return 0


def _step_of(path: Path) -> int | None:
    tail = path.name.split("-")[-1]
    return int(tail) if tail.isdigit() else None


def latest_before(checkpoints: Path, step: int | None) -> str | None:
    """The newest complete `checkpoint-N` (with N < step when `step` is given), or None."""
    found = [(n, p) for p in checkpoints.glob("checkpoint-*")
             if (n := _step_of(p)) is not None and (step is None or n < step) and checkpoint_complete(p)]
    return str(max(found)[1]) if found else None


def discard_from(checkpoints: Path, step: int) -> None:
    """Set aside checkpoints written at or after the first bad step (never resumed, kept for a look)."""
    for path in list(checkpoints.glob("checkpoint-*")):
        n = _step_of(path)
        if n is not None and n >= step:
            try:
                path.rename(path.with_name(f"discarded-{path.name}"))
            except OSError:
                pass


def apply_error_text(exc: ApplyError) -> str:
    return f"guard: the change could not be applied: {exc}"
