"""Starting a run: check the recipe and its paths, make the run directory, spawn the supervisor."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from loratui import bounds, rundir
from loratui.held_interrupt import IGNORED_AT_START
from loratui.logic import datafile, lora_targets
from loratui.logic.lora_targets import tiny_module_names
from loratui.recipe import TINY_MODEL, WATCHED, AlertsSection, Recipe, RecipeError, load_recipe, where
from loratui.safeio import UnsafeRunDir, append_file, check_run_dir
from loratui.supervisor import alerts, inherited_fds
from loratui.text import say_error


WEIGHT_FILES = ("*.safetensors", "*.bin", "*.safetensors.index.json", "*.bin.index.json")
"""What `from_pretrained` loads a local model from: a directory with none of them cannot train."""


def check_paths(recipe: Recipe, recipe_path: Path, model_path: str | None) -> None:
    """Refuse, before anything starts, a model or data path that cannot serve, data the recipe's
    `format` cannot read (at its real line), and `target_modules` the model does not have."""
    base = recipe_path.parent
    model = model_path or recipe.model.path
    where_model = "--model-path" if model_path else _at(recipe_path, "model.path")
    if model == TINY_MODEL:
        _check_targets(recipe, recipe_path, tiny_module_names(), "the embedded tiny model")
    elif _looks_local(model):
        candidate = Path(model).expanduser()
        if not candidate.is_absolute():
            candidate = base / candidate
        if not (candidate / "config.json").exists():
            what = "does not exist" if not candidate.exists() else "has no config.json"
            raise RecipeError(f"{where_model}: `model.path`: model directory {candidate} {what}; pass "
                              "--model-path /path/to/model (a directory with config.json and weights)")
        if not any(any(candidate.glob(pattern)) for pattern in WEIGHT_FILES):  # else: a traceback later
            raise RecipeError(f"{where_model}: `model.path`: model directory {candidate} has config.json but "
                              "no weights (model.safetensors, pytorch_model.bin or their sharded index); "
                              "pass --model-path /path/to/model (the directory that holds them)")
        names = _weight_module_names(candidate)
        if names:
            _check_targets(recipe, recipe_path, names, str(candidate))
    elif not _hub_cached(model):
        if os.environ.get("HF_HUB_OFFLINE"):
            raise RecipeError(f"{where_model}: `model.path`: {model} is a hub id that is not in the local "
                              "cache and HF_HUB_OFFLINE is set; pass --model-path /path/to/a/local/copy")
        say_error(f"loratui: note: {model} is not in the local hub cache; the trainer will download it "
              "(offline? pass --model-path /path/to/a/local/copy)")
    if recipe.data.path:
        check_data(recipe, recipe_path)


def check_data(recipe: Recipe, recipe_path: Path) -> None:
    """Read the data file through once as the trainer will: one message at the first bad example."""
    data_path = Path(recipe.data.path).expanduser()
    data_path = data_path if data_path.is_absolute() else recipe_path.parent / data_path

    def refuse(problem: str) -> RecipeError:
        return RecipeError(f"{_at(recipe_path, 'data.path')}: `data.path`: {problem}")

    if not data_path.exists():
        raise refuse(f"{data_path} does not exist; fix [data] path (relative paths are relative to the recipe)")
    if data_path.is_dir():
        raise refuse(f"{data_path} is a directory; name one .jsonl, .json, .csv or .parquet file in it")
    suffix = data_path.suffix.lower()
    if suffix == ".parquet":
        return  # read through `datasets` in the trainer
    if suffix not in datafile.SUFFIXES:
        raise refuse(f"{data_path.name}: use a .jsonl, .json, .csv or .parquet file")
    try:
        with bounds.open_regular(data_path) as handle:
            size = os.fstat(handle.fileno()).st_size
            if suffix == ".json" and size > CHECK_BYTES:  # one document: all of it or nothing
                say_error(f"loratui: note: {data_path} is over {CHECK_BYTES >> 20} MiB of JSON; the trainer checks "
                      "its examples as it reads them")
                return
            lines = _Budget(bounds.bounded_lines(handle), CHECK_BYTES, CHECK_SECONDS)
            count = datafile.check_examples(lines, suffix, recipe.data)
    except (datafile.DataFileError, bounds.Refused) as exc:
        at = f"{data_path}:{exc.line}" if exc.line else str(data_path)
        raise refuse(f"{at}: {exc.message}") from None
    except OSError as exc:
        raise refuse(f"{data_path}: cannot read it ({exc.strerror or exc})") from None
    if lines.cut:
        say_error(f"loratui: note: checked the first {count} examples of {data_path} ({lines.read >> 20} of "
              f"{size >> 20} MiB, the pre-flight's bound); the trainer checks the rest as it reads them")


CHECK_BYTES = 1 << 30
CHECK_SECONDS = 30.0
"""The pre-flight data check's bounds: a huge data set is checked in part, never for minutes or GBs."""


class _Budget:
    """Lines until `max_bytes` have been read or `seconds` have passed; `cut` says whether it stopped early."""

    def __init__(self, lines: Iterator[bytes], max_bytes: int, seconds: float) -> None:
        self._lines, self._max_bytes, self._deadline = lines, max_bytes, time.monotonic() + seconds
        self.read, self.cut = 0, False

    def __iter__(self) -> Iterator[bytes]:
        for line in self._lines:
            yield line
            self.read += len(line)
            if self.read >= self._max_bytes or time.monotonic() >= self._deadline:
                self.cut = True
                return


def _check_targets(recipe: Recipe, recipe_path: Path, names: set[str], model: str) -> None:
    missing = lora_targets.unmatched(recipe.lora.target_modules, names)
    target = recipe.lora.target_modules
    if lora_targets.meant_as_list(target, names):
        quoted = json.dumps(target)  # as TOML writes it
        raise RecipeError(f"{_at(recipe_path, 'lora.target_modules')}: `lora.target_modules = {quoted}` is a "
                          "string, which peft reads as a regular expression over full module names (such as "
                          f"model.layers.0.self_attn.{target}), so it matches none; a list was meant: "
                          f"target_modules = [{quoted}]")
    if missing:
        raise RecipeError(f"{_at(recipe_path, 'lora.target_modules')}: `lora.target_modules`: "
                          f"{', '.join(repr(m) for m in missing)} matches no module of {model}; its modules "
                          f"are named {lora_targets.leaf_names(names)} (or use \"all-linear\")")


MAX_HEADER = 100 << 20
"""A safetensors header larger than this is not a model's: skip the check rather than read it."""


def _weight_module_names(model_dir: Path) -> set[str]:
    """The module names a local model's weights imply (safetensors index or headers); empty if unknown."""
    index = model_dir / "model.safetensors.index.json"
    weights: list[str] = []
    try:
        if index.is_file():
            weights = list(json.loads(index.read_text(encoding="utf-8"))["weight_map"])
        else:
            for file in sorted(model_dir.glob("*.safetensors")):
                with open(file, "rb") as handle:
                    size = int.from_bytes(handle.read(8), "little")
                    if not 0 < size <= MAX_HEADER:
                        return set()
                    weights += [k for k in json.loads(handle.read(size)) if k != "__metadata__"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return set()  # unreadable or unusual: peft will judge
    return lora_targets.module_names(weights) if weights else set()


def _hub_cached(repo_id: str) -> bool:
    """Whether a hub model's config.json is already in the local Hugging Face cache."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    try:
        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except Exception:  # a malformed id: the trainer will say so
        return False


def _looks_local(path: str) -> bool:
    """A filesystem path rather than a hub id ('Qwen/Qwen2.5-7B-Instruct')."""
    return path.startswith(("/", "./", "../", "~")) or Path(path).exists() or path.count("/") != 1


def _at(recipe_path: Path, key: str) -> str:
    return where(recipe_path, bounds.read_text(recipe_path), key)


def start_run(recipe_path: Path, runs_dir: Path, name: str | None = None, model_path: str | None = None,
              max_steps: int | None = None, resume_from: str | None = None,
              env: dict[str, str] | None = None, alert_url: str | None = None,
              slurm_limit: tuple[str, bool] = ("", False), first_env: dict[str, str] | None = None) -> rundir.RunDir:
    """Validate, create `runs/<id>/`, start the detached supervisor; returns at once.

    `alert_url`: where alerts go (`--notify`, or the run a restart replaces); else the variable the recipe's
    `[alerts] url_env` names, read now. Kept for the run (RunDir.alerts, 0600) before its supervisor starts.
    `first_env`: the environment the trainer starts from (a restart's: the replaced run's first one), where this
    process's own would be the viewer's.
    """
    if max_steps is not None and max_steps < 1:
        raise RecipeError(f"--max-steps {max_steps}: must be at least 1")
    recipe = load_recipe(recipe_path, model_path=model_path, max_steps=max_steps)
    alert_url = alert_url or alerts.env_url_checked(recipe.alerts)  # before anything is made
    check_paths(recipe, recipe_path, model_path)
    name = name or recipe_path.stem
    settings = rundir.RunSettings(
        run_id=rundir.new_run_id(name), name=name, recipe_source=str(recipe_path.resolve()),
        recipe_dir=str(recipe_path.resolve().parent),
        model_path=str(Path(model_path).expanduser().resolve()) if model_path and _looks_local(model_path)
        else model_path, max_steps=max_steps, resume_from=resume_from, env=env or {},
        save_before_limit=slurm_limit[0], requeue=slurm_limit[1])
    run = create_for_job(runs_dir, settings, bounds.read_text(recipe_path))
    alerts.save_target(run, alert_url or alerts.url_from_env(recipe.alerts))
    spawn_supervisor(run, kept_env=_keep_env(run, first_env))
    return run


def _keep_env(run: rundir.RunDir, first_env: dict[str, str] | None) -> bool:
    """Keep `first_env` as the new run's first environment for its supervisor to start the trainer in (True when
    kept; an unwritable state directory is said by the supervisor, which then takes its own)."""
    if first_env is None:
        return False
    try:
        run.keep_first_env(first_env)
    except OSError:
        return False
    return True


def check_adoptable(run: rundir.RunDir) -> None:
    """Refuse (UnsafeRunDir) to start a new supervisor on a run this user's loratui did not make, or one
    with a link or another user's file in it: its settings and recipe would run as the user's code."""
    check_run_dir(run.path)
    if not run.sealed():
        raise UnsafeRunDir(f"{run.path} was not started by your loratui (a copy, an unpacked tarball, another "
                           "user's run, or one from a loratui before run seals): its settings and recipe are "
                           "never run again. Read its recipe, then start a run of your own: loratui run "
                           f"{run.recipe}")


SOCKET_PATH_MAX = 107
"""Bytes in a Unix socket's path (sun_path holds 108 with its NUL on Linux)."""


def spawn_supervisor(run: rundir.RunDir, adopt: bool = False, stdin: int | None = None, kept_env: bool = False,
                     fds: tuple[int, ...] = ()) -> int:
    """Start `python -m loratui.supervisor` in its own session, detached from this terminal.

    `adopt`: take over a suspended run whose supervisor died, resuming from its last checkpoint.
    `kept_env`: the run's first environment is kept already (`_keep_env`): the trainer starts in it.
    `stdin`: a file descriptor the supervisor hands to a watched command's first launch (`passed_stdin`);
    otherwise /dev/null. `fds`: the descriptors beyond 0-2 it hands to a watched command's first launch
    (`inherited_fds`); this process lets go of them once the supervisor has them.
    """
    if len(os.fsencode(run.control)) > SOCKET_PATH_MAX:
        # The supervisor could not open its control socket and would die before its first event.
        import shutil

        from loratui.errors import UsageError

        shutil.rmtree(run.path, ignore_errors=True)
        raise UsageError(f"{run.control}: the run's control socket path is {len(os.fsencode(run.control))} "
                         f"bytes, over the {SOCKET_PATH_MAX} a Unix socket allows; pass a shorter --runs-dir "
                         "or --run-name")
    if adopt:  # an existing run: whatever is in it now was checked by `control.deliver`; again, to be sure
        check_adoptable(run)
    with append_file(run.supervisor_log) as err, open(os.devnull, "rb") as devnull:
        proc = subprocess.Popen(
            [sys.executable, "-m", "loratui.supervisor", str(run.path)] + (["--adopt"] if adopt else [])
            + (["--kept-env"] if kept_env else []) + (["--interrupt-ignored"] if IGNORED_AT_START else [])
            + inherited_fds.as_argument(fds),
            stdin=devnull if stdin is None else stdin, stdout=err, stderr=err, start_new_session=True,
            close_fds=True, pass_fds=fds,
        )
    inherited_fds.let_go(fds)
    # Reaped when it ends: a viewer or an MCP server outlives the supervisors it starts (the run's end, a resume),
    # and each one would stay a zombie (`<defunct>` in ps) until it exits. poll() below shares Popen's lock.
    threading.Thread(target=proc.wait, name=f"reap-supervisor-{proc.pid}", daemon=True).start()
    # The log exists once the supervisor has written its header; wait briefly so readers find it.
    deadline = time.monotonic() + 10
    # An adopted run's log has its header already: there, wait for the new supervisor's pidfile instead.
    while time.monotonic() < deadline and not (run.events.exists() and run.events.stat().st_size
                                               and (not adopt or run.supervisor_pid() is not None)):
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    return proc.pid


_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)?)?")
_PYTHON_TAKES = frozenset("WX")
"""Python's options that take the next word as their value (`-W ignore`, `-X dev`)."""


def python_script(command: list[str]) -> str | None:
    """The script a `python [options] SCRIPT ...` command runs, None for any other command (`-c`, `-m`, standard
    input, another program): Python exits 2 with "can't open file" when it is missing, after the run started."""
    if not command or not _PYTHON.fullmatch(Path(command[0]).name):
        return None
    words = iter(command[1:])
    for word in words:
        if word == "--" or not word.startswith("-") or word == "-":
            word = next(words, None) if word == "--" else word
            return word if word not in (None, "-") else None
        if word.startswith("--"):  # --check-hash-based-pycs MODE, or a flag of its own
            if word == "--check-hash-based-pycs":
                next(words, None)
            continue
        flags = word[1:]
        for i, flag in enumerate(flags):
            if flag in "cm":
                return None
            if flag in _PYTHON_TAKES:
                if i == len(flags) - 1:
                    next(words, None)
                break
    return None


def start_command(command: list[str], runs_dir: Path, name: str | None = None, warn_gb: float | None = None,
                  cwd: Path | None = None, resume_from: str | None = None,
                  env: dict[str, str] | None = None, alert_url: str | None = None,
                  slurm_limit: tuple[str, bool] = ("", False), stdin: int | None = None,
                  first_env: dict[str, str] | None = None, fds: tuple[int, ...] = ()) -> rundir.RunDir:
    """`loratui run -- COMMAND`: the same supervisor and run directory, with COMMAND as the trainer.

    `resume_from` and `env` serve a restart with a fixed config (its Trainer resumes from that checkpoint;
    `env` holds only the variables advice may set; `first_env`: the replaced run's first environment, the command's
    base, as `start_run` takes it). `stdin`: the command's standard input (`passed_stdin`); `fds`: the descriptors
    beyond 0-2 it would inherit alone (`inherited_fds.inherited`)."""
    import shlex
    import shutil

    from loratui.errors import UsageError
    from loratui.logic.command_keys import run_name
    from loratui.text import inert

    if not command:
        raise UsageError("run: give a recipe (`loratui run tiny`) or a command to watch "
                         "after `--` (loratui run -- python train.py)")
    if shutil.which(command[0]) is None:
        raise UsageError(f"run -- {shlex.join(command)}: `{command[0]}` is not a program on PATH "
                         "(nor an executable file); check the spelling, or activate the environment it is in")
    if warn_gb is not None and not 0 < warn_gb < 4096:
        raise UsageError(f"--warn-gb {warn_gb}: give the VRAM warning line in GiB, e.g. --warn-gb 30")
    where = (cwd or Path.cwd()).resolve()
    script = python_script(command)
    if script is not None and not (where / script).exists():
        raise UsageError(f"run -- {shlex.join(command)}: the script {script} does not exist (looked in {where}); "
                         "check its name, or give its path from this directory")
    alert_url = alert_url or alerts.env_url_checked(AlertsSection())
    name = name or run_name(command)
    # The run directory's recipe.toml holds only [monitor] until the hooked Trainer writes its live settings.
    line = 30.0 if warn_gb is None else float(warn_gb)
    # One comment line whatever the arguments hold (a newline, a control character), or TOML fails.
    shown = inert(shlex.join(command)[:300], newlines=False)
    placeholder = (f"# loratui run -- {shown}\n# No recipe: the command is watched. A "
                   "hooked Trainer records its live settings here at train begin.\n\n"
                   f"[model]\npath = \"{WATCHED}\"\n\n[data]\ndataset = \"{WATCHED}\"\n\n"
                   f"[monitor]\nwarn_gb = {line}\n")
    settings = rundir.RunSettings(run_id=rundir.new_run_id(name), name=name, recipe_source="",
                                  recipe_dir=str(where), command=list(command), cwd=str(where),
                                  resume_from=resume_from, env=env or {}, save_before_limit=slurm_limit[0],
                                  requeue=slurm_limit[1])
    run = create_for_job(runs_dir, settings, placeholder)
    alerts.save_target(run, alert_url or alerts.url_from_env(AlertsSection()))
    spawn_supervisor(run, stdin=stdin, kept_env=_keep_env(run, first_env), fds=fds)
    return run


def passed_stdin() -> int | None:
    """The standard input a watched command gets, as `nohup` decides it: a pipe or a file is the command's
    (`producer | loratui run -- python x.py` reads what it would alone), a terminal is not (the command
    outlives it, and the app reads its keys): None, /dev/null."""
    try:
        return None if sys.stdin is None or sys.stdin.isatty() else sys.stdin.fileno()
    except (OSError, ValueError):  # closed, or no real file
        return None


NODE_WAIT_S = 300.0
"""How long node k waits for node 0 to make the shared run directory."""


def create_for_job(runs_dir: Path, settings: rundir.RunSettings, recipe_text: str) -> rundir.RunDir:
    """The run directory; in a multi-node Slurm job (one `loratui run` per node), the one all nodes share:
    `runs/job<ID>-<name>/`, made by node 0, with node k's own run directory in its `nodes/<node>/`, so no
    two hosts ever append to one file (nodelogs.py merges them for the views)."""
    import msgspec

    from loratui import slurm
    from loratui.errors import UsageError

    job = slurm.job_env()
    if int(job.get("SLURM_JOB_NUM_NODES", "1") or 1) <= 1:
        return rundir.create(runs_dir, settings, recipe_text)
    settings = msgspec.structs.replace(settings, run_id=f"job{job['SLURM_JOB_ID']}-{settings.run_id.split('-', 2)[-1]}")
    if job.get("SLURM_NODEID", "0") == "0":
        return rundir.create(runs_dir, settings, recipe_text)
    shared = rundir.RunDir(runs_dir / settings.run_id)
    deadline = time.monotonic() + NODE_WAIT_S
    while not shared.settings.is_file():
        if time.monotonic() > deadline:
            raise UsageError(f"{shared.path}: node 0 of job {job['SLURM_JOB_ID']} did not make the run directory "
                             f"within {NODE_WAIT_S:.0f} s; is --runs-dir on a filesystem every node shares?")
        time.sleep(0.5)
    node = rundir.node_name()
    return rundir.create(shared.path / "nodes", msgspec.structs.replace(settings, run_id=node), recipe_text)
