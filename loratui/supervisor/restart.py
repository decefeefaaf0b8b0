"""Applying an advice item: a new recipe beside the old one, and a restart with it.

The user's recipe is never edited in place: the run's recipe copy (what actually ran) gets the change and
is written as `<stem>.fix-<advice id>[-N].toml` next to the original (or in the run directory when that
folder is not writable), created exclusively and never through a symbolic link.

A run directory is someone's code and settings: only its owner may apply advice to it, and only the
environment variables loratui itself proposes (`ADVICE_ENV`) are carried from its settings to the new
trainer, so a stored `PYTHONPATH` or `LD_PRELOAD` never runs as the user who restarts it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from loratui import events
from loratui.bounds import BOM
from loratui.errors import ApplyError
from loratui.logic import applied
from loratui.logic.recipe_edit import EditError, absolute_data_path, apply_changes, recipe_changes
from loratui.recipe import BUILTIN_DIR, RecipeError, load_recipe
from loratui.rundir import RunDir, checkpoint_complete
from loratui.supervisor import alerts
from loratui.supervisor.relaunch import carried_env, check_owner, create_new, final_state, stop_and_wait

_FIX_MARK = re.compile(r"(\.fix-[A-Za-z0-9_]+(-\d+)?)+$")
"""What an earlier fix added to a recipe's name (`qwen7b.fix-vram_near_limit-2`)."""

__all__ = ["carried_env", "check_owner", "create_new", "final_state", "restart_with", "stop_and_wait", "write_fix",
           "write_fixed_recipe"]

def write_fix(run: RunDir, advice_id: str, fix: dict[str, Any]) -> tuple[Path, dict[str, str]]:
    """`A`: a fixed recipe for a recipe run, a fixed copy of the YAML config for a watched command."""
    if run.read_settings().command:
        from loratui.supervisor.config_fix import write_fixed_config

        return write_fixed_config(run, advice_id, fix)
    return write_fixed_recipe(run, advice_id, fix)


def write_fixed_recipe(run: RunDir, advice_id: str, change: dict[str, Any]) -> tuple[Path, dict[str, str]]:
    """Write the changed recipe; returns its path and the whole environment the restart would give the
    trainer (the run's carried allow-listed variables with the advice's own on top), for the prompt."""
    check_owner(run)
    keys, env = recipe_changes(change)
    if not keys and not env:
        raise ApplyError("this advice has no recipe change to apply")
    settings = run.read_settings()
    try:
        # a byte order mark is dropped: the copy is ours, and our header goes first
        text = apply_changes(run.recipe.read_text(encoding="utf-8"), keys).removeprefix(BOM)
    except (OSError, UnicodeDecodeError, EditError) as exc:
        raise ApplyError(f"{run.recipe}: cannot apply the change ({exc})") from None
    source = Path(settings.recipe_source)
    # Beside the user's recipe; never inside the installed package (a built-in recipe's run), nor where
    # the user cannot write: then the run directory (the data path is absolute in the copy: see below).
    beside = os.access(source.parent, os.W_OK) and source.parent.resolve() != BUILTIN_DIR.resolve()
    folder = source.parent if beside else run.path
    if not beside:
        text = absolute_data_path(text, settings.recipe_dir)
    stem = f"{_FIX_MARK.sub('', source.stem)}.fix-{advice_id}"  # a fix of a fix: x.fix-b, not x.fix-a.fix-b
    try:  # validated before anything is written: a bad change leaves no file behind
        load_recipe(folder / f"{stem}.toml", text=text, model_path=settings.model_path)
    except RecipeError as exc:
        raise ApplyError(f"the changed recipe does not validate: {exc}") from None
    target = _create_new(folder, stem, applied.with_header(text, _entry(run, advice_id, change)))
    return target, {**carried_env(settings.env), **env}


def _create_new(folder: Path, stem: str, text: str) -> Path:
    """Create `stem.toml` (or `stem-N.toml`) that did not exist (see `create_new`)."""
    return create_new(folder, lambda n: f"{stem}.toml" if n == 1 else f"{stem}-{n}.toml", text)


def _entry(run: RunDir, advice_id: str, change: dict[str, Any]) -> str:
    changed = ", ".join(f"{k} = {v!r}" for k, v in change.items())
    return f"run {run.run_id} (advice {advice_id}): {changed}"


def restart_command_line(run: RunDir, fixed: Path) -> list[str]:
    """The command a restart with `fixed` re-runs, as run.json holds it ([] for a recipe run: loratui's own
    trainer runs), for the prompt to show before anything runs."""
    if not run.read_settings().command:
        return []
    from loratui.supervisor import config_fix

    return config_fix.restart_command_line(run, fixed)


def resume_point(checkpoints: Path) -> str | None:
    """The checkpoint a restart with applied advice resumes from: the newest complete one whose log_history holds no
    non-finite loss or grad_norm. One written after a NaN carries the weights that went NaN; strict JSON once
    refused those files as cut short, which kept a restart off them (rundir.checkpoint_complete now reads them,
    so a suspended run resumes where it was)."""
    import json
    import math

    found = sorted(((int(p.name.rpartition("-")[2]), p) for p in checkpoints.glob("checkpoint-*")
                    if p.name.rpartition("-")[2].isdigit() and checkpoint_complete(p)), reverse=True)
    for _, path in found:
        try:
            history = json.loads((path / "trainer_state.json").read_bytes()).get("log_history") or []
        except (OSError, ValueError, AttributeError):
            continue
        values = [entry.get(key) for entry in history if isinstance(entry, dict) for key in ("loss", "grad_norm")]
        if all(not isinstance(v, float) or math.isfinite(v) for v in values):
            return str(path)
    return None


def restart_with(run: RunDir, recipe: Path, env: dict[str, str], send: Any, wait_s: float = 180.0) -> RunDir:
    """Stop `run` if it still trains, then start `recipe`: from the last checkpoint, or from step 0 when
    the run had finished (a finished run's last checkpoint is its end: resuming it would train past
    max_steps). A watched command is run again with `recipe` (its fixed config) instead. Returns the new
    run."""
    from loratui.supervisor.launch import start_run

    check_owner(run)
    if run.read_settings().command:  # a watched command: the same command line with the fixed config
        from loratui.supervisor.config_fix import restart_command

        return restart_command(run, recipe, env, send, wait_s)
    first_env = run.kept_first_env()  # the run's own environment, not this viewer's (read before the stop)
    stop_and_wait(run, send, wait_s)
    settings = run.read_settings()
    resume = None if final_state(run) == events.FINISHED else resume_point(run.checkpoints)
    return start_run(recipe, run.path.parent, settings.name, settings.model_path, settings.max_steps,
                     resume_from=resume, env={**carried_env(settings.env), **carried_env(env)},
                     alert_url=alerts.saved_target(run),  # the new run alerts where this one did
                     first_env=first_env)
