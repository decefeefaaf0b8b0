"""Applying an advice item: a new recipe beside the old one, and a restart from the last checkpoint.

The user's recipe is never edited in place: the run's recipe copy (what actually ran) gets the change and
is written as `<stem>.fix-<advice id>[-N].toml` next to the original (or in the run directory when that
folder is not writable).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from loratui import runstatus
from loratui.errors import ApplyError
from loratui.logic.recipe_edit import apply_changes, recipe_changes
from loratui.recipe import RecipeError, load_recipe
from loratui.rundir import RunDir, latest_checkpoint


def write_fixed_recipe(run: RunDir, advice_id: str, change: dict[str, Any]) -> tuple[Path, dict[str, str]]:
    """Write the changed recipe; returns its path and the environment variables the change asks for."""
    keys, env = recipe_changes(change)
    if not keys and not env:
        raise ApplyError("this advice has no recipe change to apply")
    text = apply_changes(run.recipe.read_text(encoding="utf-8"), keys)
    settings = run.read_settings()
    source = Path(settings.recipe_source)
    folder = source.parent if os.access(source.parent, os.W_OK) else run.path
    target = _free_name(folder, f"{source.stem}.fix-{advice_id}")
    target.write_text(_header(run, advice_id, change) + text, encoding="utf-8")
    try:
        load_recipe(target)
    except RecipeError as exc:
        target.unlink()
        raise ApplyError(f"the changed recipe does not validate: {exc}") from None
    return target, env


def _free_name(folder: Path, stem: str) -> Path:
    candidate, n = folder / f"{stem}.toml", 1
    while candidate.exists():
        n += 1
        candidate = folder / f"{stem}-{n}.toml"
    return candidate


def _header(run: RunDir, advice_id: str, change: dict[str, Any]) -> str:
    changed = ", ".join(f"{k} = {v!r}" for k, v in change.items())
    return f"# Written by loratui from run {run.run_id} (advice {advice_id}): {changed}\n"


def restart_with(run: RunDir, recipe: Path, env: dict[str, str], send: Any, wait_s: float = 180.0) -> RunDir:
    """Stop `run` if it still trains, then start `recipe` from its last checkpoint; returns the new run."""
    from loratui.supervisor.launch import start_run

    if not _ended(run):
        send("stop")
        deadline = time.monotonic() + wait_s
        while not _ended(run) and time.monotonic() < deadline:
            time.sleep(0.5)
    settings = run.read_settings()
    return start_run(recipe, run.path.parent, settings.name, settings.model_path, settings.max_steps,
                     resume_from=latest_checkpoint(run.checkpoints), env={**settings.env, **env})


def _ended(run: RunDir) -> bool:
    return runstatus.is_over(runstatus.read(run))
