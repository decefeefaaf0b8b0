"""Applying advice to a watched LLaMA-Factory or axolotl command: a fixed copy of its YAML (or JSON) config
beside the original, and a restart of the same command line with the copy's path in place of the original's.

The user's config is never edited: the copy (`<stem>.loratui-fix<N>.yaml` / `.json`) is created exclusively and never
through a symbolic link, with the original's permissions (a config may hold a hub token). Only the owner's
own, real (not linked) config is read; loratui does not rewrite another user's file.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

from loratui import bounds
from loratui.errors import ApplyError
from loratui.logic import applied, command_keys, json_edit, yaml_edit
from loratui.logic.config_keys import ConfigEditError
from loratui.logic.recipe_edit import recipe_changes
from loratui.rundir import RunDir
from loratui.supervisor.relaunch import carried_env, check_owner, create_new, final_state, stop_and_wait

MAX_CONFIG_BYTES = 4 << 20
_FIX_MARK = re.compile(r"\.loratui-fix\d+$")


def config_path(run: RunDir) -> tuple[Path, str]:
    """The watched command's config file (as the command ran it, from its working directory) and the
    argument that names it."""
    settings = run.read_settings()
    index = command_keys.config_index(settings.command) if settings.command else None
    if index is None:
        raise ApplyError("this run names no LLaMA-Factory or axolotl config file that loratui could rewrite")
    arg = settings.command[index]
    return Path(settings.cwd or ".") / Path(arg).expanduser(), arg


def write_fixed_config(run: RunDir, advice_id: str, fix: dict[str, Any]) -> tuple[Path, dict[str, str]]:
    """Write the fixed copy of the run's config; returns its path and the environment a restart gives."""
    check_owner(run)
    keys, env = recipe_changes(fix)
    if not keys:
        raise ApplyError("this advice has no config change to apply")
    source, _ = config_path(run)
    text, mode = read_own(source)
    try:
        if source.suffix.lower() == ".json":  # JSON has no comments: no header (the name says it)
            fixed = json_edit.apply_changes(text, keys)
        else:
            changed = ", ".join(f"{key}: {yaml_edit.scalar(value)}" for key, value in keys.items())
            bom = bounds.BOM if text.startswith(bounds.BOM) else ""
            earlier, body = applied.split(text.removeprefix(bom))  # a fix of a fix: one header, both listed
            entry = f"run {run.run_id} (advice {advice_id}), from {source.name}: {changed}"
            fixed = yaml_edit.apply_changes(bom + body, keys, "\n".join(applied.lines([*earlier, entry])))
    except ConfigEditError as exc:
        where = f"{source}:{exc.line}" if exc.line else str(source)
        raise ApplyError(f"{where}: {exc.message}; fix the file (the command reads it too) or make the "
                         "change by hand") from None
    base = _FIX_MARK.sub("", source.stem)  # a fix of a fix is fix2, not x.loratui-fix1.loratui-fix1
    target = create_new(source.parent, lambda n: f"{base}.loratui-fix{n}{source.suffix}", fixed, mode)
    return target, {**carried_env(run.read_settings().env), **env}


def read_own(source: Path) -> tuple[str, int]:
    """The config's text and permission bits: refused when it is a link, not a file, or someone else's."""
    try:
        info = os.lstat(source)
    except OSError as exc:
        raise ApplyError(f"{source}: cannot read the config ({exc.strerror or exc})") from None
    if stat.S_ISLNK(info.st_mode):
        raise ApplyError(f"{source} is a symbolic link; loratui writes a fixed copy only beside a real file: "
                         f"run the command on the file it points to ({os.path.realpath(source)})")
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_CONFIG_BYTES:
        raise ApplyError(f"{source}: not a config file loratui rewrites (a regular file under 4 MiB)")
    if info.st_uid != os.getuid():
        raise ApplyError(f"{source} belongs to another user (uid {info.st_uid}); loratui rewrites only your own "
                         "configs: copy it, run your copy, and apply the advice to that run")
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
        return data.decode("utf-8"), stat.S_IMODE(info.st_mode) & 0o666
    except UnicodeDecodeError as exc:
        raise ApplyError(f"{source}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise ApplyError(f"{source}: cannot read the config ({exc.strerror or exc})") from None


def restart_command_line(run: RunDir, config: Path) -> list[str]:
    """The command line a restart with `config` runs: the run's own (from its run.json, what will really
    run, not the log's header) with the copy's path in place of the original config's."""
    settings = run.read_settings()
    _, arg = config_path(run)
    # The copy sits beside the original: name it the way the command named the original (relative stays
    # relative to the same working directory).
    return command_keys.with_config(settings.command, os.path.join(os.path.dirname(arg), config.name))


def restart_command(run: RunDir, config: Path, env: dict[str, str], send: Any, wait_s: float = 180.0) -> RunDir:
    """Stop `run` if it still trains, then run its command again with `config` in place of its config:
    from the last checkpoint the watched Trainer saved, or from step 0 when the run had finished.
    Reached through `restart.restart_with`, which has checked the owner."""
    from loratui import events
    from loratui.supervisor import alerts
    from loratui.supervisor.command import last_checkpoint
    from loratui.supervisor.launch import start_command

    settings = run.read_settings()
    command = restart_command_line(run, config)
    first_env = run.kept_first_env()  # the run's own environment, not this viewer's (read before the stop)
    stop_and_wait(run, send, wait_s)
    recipe, _ = run.load_recipe()
    resume = None if final_state(run) == events.FINISHED else last_checkpoint(run)
    return start_command(command, run.path.parent, settings.name, recipe.monitor.warn_gb if recipe else None,
                         cwd=Path(settings.cwd) if settings.cwd else None, resume_from=resume,
                         env={**carried_env(settings.env), **carried_env(env)},
                         alert_url=alerts.saved_target(run),  # the new run alerts where this one did
                         first_env=first_env)
