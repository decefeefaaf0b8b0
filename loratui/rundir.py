"""The run directory: the contract between the supervisor, the trainer and every viewer.

runs/<run-id>/ (mode 0700) holds:
  recipe.toml      a copy of the recipe as it was started
  run.json         command-line overrides and the resolved settings (msgspec JSON, never pickle)
  events.jsonl     the append-only event log
  trainer.stdout.log, trainer.stderr.log   the trainer's raw output
  supervisor.log   the supervisor's own stderr (for its crashes)
  supervisor.pid   the supervisor's pid while it lives
  control.sock     the control socket (mode 0600)
  checkpoints/     the Trainer's output_dir
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import msgspec

from loratui import events

SUSPEND_EXIT = 75
"""The trainer's exit code after a suspend: checkpoint written, GPU freed, resumable (trainer → supervisor)."""


class RunSettings(msgspec.Struct, frozen=True, kw_only=True):
    """What `loratui run` decided beyond the recipe file itself."""

    run_id: str
    name: str
    recipe_source: str
    recipe_dir: str = "."  # relative paths in the recipe are relative to where the recipe file was
    model_path: str | None = None
    max_steps: int | None = None
    resume_from: str | None = None
    env: dict[str, str] = {}  # environment for the trainer (e.g. PYTORCH_CUDA_ALLOC_CONF from advice)


class RunNotFound(Exception):
    """No run matches what the user named."""


@dataclass(frozen=True)
class RunDir:
    """Paths inside one run directory."""

    path: Path

    @property
    def recipe(self) -> Path:
        return self.path / "recipe.toml"

    @property
    def settings(self) -> Path:
        return self.path / "run.json"

    @property
    def events(self) -> Path:
        return self.path / "events.jsonl"

    @property
    def stdout_log(self) -> Path:
        return self.path / "trainer.stdout.log"

    @property
    def stderr_log(self) -> Path:
        return self.path / "trainer.stderr.log"

    @property
    def supervisor_log(self) -> Path:
        return self.path / "supervisor.log"

    @property
    def pidfile(self) -> Path:
        return self.path / "supervisor.pid"

    @property
    def control(self) -> Path:
        return self.path / "control.sock"

    @property
    def commands(self) -> Path:
        """Control commands relayed to the trainer ranks, one a line (append-only)."""
        return self.path / "control.cmds"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def run_id(self) -> str:
        return self.path.name

    def read_settings(self) -> RunSettings:
        """The run's settings (run.json)."""
        return msgspec.json.decode(self.settings.read_bytes(), type=RunSettings)

    def supervisor_pid(self) -> int | None:
        """The live supervisor's pid, or None when it is gone."""
        try:
            pid = int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return pid
        return pid


def default_runs_dir() -> Path:
    """`$LORATUI_RUNS` or ./runs."""
    return Path(os.environ.get("LORATUI_RUNS", "runs"))


def new_run_id(name: str, now: float | None = None) -> str:
    """A sortable, readable id: 20261202-154501-tiny."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now if now is not None else time.time()))
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "run"
    return f"{stamp}-{safe}"


def create(runs_dir: Path, settings: RunSettings, recipe_text: str) -> RunDir:
    """Make the run directory (0700) with its recipe copy and settings."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    path = runs_dir / settings.run_id
    suffix = 1
    while path.exists():
        suffix += 1
        path = runs_dir / f"{settings.run_id}-{suffix}"
    path.mkdir(mode=0o700)
    os.chmod(path, 0o700)
    run = RunDir(path)
    if path.name != settings.run_id:
        settings = msgspec.structs.replace(settings, run_id=path.name)
    run.recipe.write_text(recipe_text, encoding="utf-8")
    run.settings.write_bytes(msgspec.json.format(msgspec.json.encode(settings)))
    run.checkpoints.mkdir()
    return run


def list_runs(runs_dir: Path) -> list[RunDir]:
    """Every run directory under `runs_dir`, oldest first."""
    if not runs_dir.is_dir():
        return []
    return sorted((RunDir(p) for p in runs_dir.iterdir() if (p / "events.jsonl").exists()),
                  key=lambda r: r.path.name)


def resolve(name: str | None, runs_dir: Path) -> RunDir:
    """The run a user named: a path, an id, a unique id prefix or suffix, or None for the newest."""
    if name:
        direct = Path(name)
        if (direct / "events.jsonl").exists():
            return RunDir(direct)
        if direct.name == "events.jsonl" and direct.exists():
            return RunDir(direct.parent)
    runs = list_runs(runs_dir)
    if not runs:
        raise RunNotFound(f"no runs in {runs_dir}/; start one with `loratui run recipes/tiny.toml`"
                          " or pass --runs-dir")
    if not name:
        return runs[-1]
    matches = [r for r in runs if r.run_id == name] or [
        r for r in runs if r.run_id.startswith(name) or r.run_id.endswith(name)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise RunNotFound(f"no run named {name!r} in {runs_dir}/; `loratui ls` lists them")
    # Several runs share a name suffix: the newest is what people mean by "the tiny run".
    return matches[-1]


def is_final(state: str) -> bool:
    """Whether a run in `state` is over."""
    return state in events.FINAL_STATES


def latest_checkpoint(checkpoints: Path) -> str | None:
    """The Trainer's newest `checkpoint-N` directory, or None."""
    found = [p for p in checkpoints.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()]
    if not found:
        return None
    return str(max(found, key=lambda p: int(p.name.split("-")[-1])))
