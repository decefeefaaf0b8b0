"""The run directory: the contract between the supervisor, the trainer and every viewer.

runs/<run-id>/ (mode 0700) holds:
  recipe.toml      a copy of the recipe as it was started
  run.json         command-line overrides and the resolved settings (msgspec JSON, never pickle)
  run.sig          the seal: this user's HMAC of run.json (and of a recipe run's recipe.toml), written when
                   loratui made the run; a run without a valid one came from elsewhere, and what its run.json
                   and recipe say (an environment, a command, trust_remote_code) is never run again
  events.jsonl     the append-only event log
  trainer.stdout.log, trainer.stderr.log   the trainer's raw output
  supervisor.log   the supervisor's own stderr (for its crashes)
  supervisor.pid   the supervisor's pid while it lives
  trainer.pid      the trainer's (rank 0's) pid while it lives
  status.json      a small summary the supervisor keeps current (state, step, loss, peak), so `ls` and the
                   views never read a whole log to say where a run stands
  control.sock     the control socket (mode 0600)
  control.cmds     control commands relayed to the trainer ranks, one a line (append-only)
  control.in/      control requests from another host (a login node), one file each, and the replies
  trainer.hook.json  a watched command's Trainer hook is live (what it obeys)
  checkpoints/     the Trainer's output_dir (always: a recipe's output_dir is refused)
  checkpoints/saved/   checkpoints saved on request, kept out of save_total_limit's rotation

Kept outside it: where the run's alerts go (`--notify URL`, or `[alerts] url_env` read at launch), a secret,
in the user's state directory (`RunDir.alerts`, see userstate.py), so a run directory copied into a bug report or shared with
a colleague never carries it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import msgspec
import psutil

from loratui import bounds
from loratui.recipe import Recipe, RecipeError, load_recipe
from loratui.text import inert
from loratui.userstate import remember_run, remembered_runs, sign, signed, state_dir

SUSPEND_EXIT = 75
"""The trainer's exit code after a suspend: checkpoint written, GPU freed, resumable (trainer → supervisor)."""
STOPPED_CODES = (0, SUSPEND_EXIT, -signal.SIGTERM, -signal.SIGKILL)
"""A trainer's exit codes that end a run someone asked to stop as `stopped`: a stop that had to terminate a
trainer stuck before its next step is still a stop."""


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
    command: list[str] = []  # `loratui run -- COMMAND`: the watched command, run as the trainer
    cwd: str = ""  # the directory the command runs in
    save_before_limit: str = ""  # --save-before-limit: a checkpoint this long before the Slurm job's end
    requeue: bool = False  # --requeue: then exit and requeue the job, which resumes this run


IMPORTED_MARK = "# Imported run"
"""How the recipe.toml of an imported run begins (commands/importer.py): a stub, not a recipe, so that
advice never quotes default settings as the run's."""


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
    def trainer_pidfile(self) -> Path:
        return self.path / "trainer.pid"

    @property
    def status_file(self) -> Path:
        return self.path / "status.json"

    @property
    def control(self) -> Path:
        return self.path / "control.sock"

    @property
    def commands(self) -> Path:
        """Control commands relayed to the trainer ranks, one a line (append-only)."""
        return self.path / "control.cmds"

    @property
    def inbox(self) -> Path:
        """Control requests from other hosts, one file each (no socket crosses hosts); replies beside them."""
        return self.path / "control.in"

    @property
    def resume(self) -> Path:
        """The checkpoint a watched command's launch resumes from (the supervisor writes it before the launch, and
        removes it before one that resumes nothing); the hook reads it at the process's first train(). A file, not a
        variable: the command's environment holds only the variables that let its own processes be watched."""
        return self.path / "trainer.resume"

    @property
    def hooked(self) -> Path:
        """Written by loratui's Trainer hook in a watched command at train begin: what it obeys (JSON)."""
        return self.path / "trainer.hook.json"

    @property
    def alerts(self) -> Path:
        """Where the run's alerts go (the URL: a secret, mode 0600), read by each supervisor of the run (a
        resume, a restart): in the user's state directory (XDG_STATE_HOME), named by a hash of the run
        directory's real path, never inside the run directory."""
        key = hashlib.sha256(os.fsencode(self.path.resolve())).hexdigest()[:32]
        return state_dir() / "alerts" / f"{key}.json"

    @property
    def first_env(self) -> Path:
        """The environment the run's first supervisor was started with (the user's, as `loratui run` had it: it may
        hold secrets, mode 0600), for a supervisor that re-adopts the run (`loratui resume` from another shell) to
        give the trainer the same one, and for a restart with applied advice to start the new run in it (kept after
        the run's end for that, as `alerts` is): beside `alerts`, in the user's state directory, never in the run
        directory."""
        key = hashlib.sha256(os.fsencode(self.path.resolve())).hexdigest()[:32]
        return state_dir() / "env" / f"{key}.json"

    def keep_first_env(self, environ: dict[str, str]) -> None:
        """Keep `environ` as the run's first environment (`first_env`, 0600); OSError when it cannot be written."""
        self.first_env.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_private(self.first_env, json.dumps(environ).encode("utf-8"))

    def kept_first_env(self) -> dict[str, str] | None:
        """The run's first environment as kept (`first_env`), or None (none kept, or not a mapping of strings)."""
        try:
            kept = json.loads(self.first_env.read_bytes())
        except (OSError, ValueError, RecursionError):
            return None
        if isinstance(kept, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in kept.items()):
            return kept
        return None

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def seal_file(self) -> Path:
        """This user's HMAC of what the run would execute (see `seal`)."""
        return self.path / "run.sig"

    def sealed_bytes(self) -> bytes:
        """What the seal covers: run.json (its environment, command, paths) and, for a recipe run, the
        recipe copy its trainer loads (model path, trust_remote_code)."""
        settings = self.settings.read_bytes()
        command = msgspec.json.decode(settings, type=RunSettings).command
        recipe = b"" if command else self.recipe.read_bytes()  # a watched command's copy is only a record
        return b"loratui-run-seal-1\0" + settings + b"\0" + recipe

    def sealed(self) -> bool:
        """Whether this user's loratui made this run (and nobody changed what it would run since)."""
        try:
            return signed(self.sealed_bytes(), self.seal_file.read_text(encoding="ascii"))
        except (OSError, ValueError, msgspec.DecodeError, msgspec.ValidationError):
            return False

    @property
    def run_id(self) -> str:
        """The directory's name, inert: a name is anyone's choice and is shown on terminals."""
        return inert(self.path.name, newlines=False)

    def append_command(self, command: str) -> None:
        """Append one control command to `control.cmds` (whole line, never through a link)."""
        fd = os.open(self.commands, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, command.encode() + b"\n")
        finally:
            os.close(fd)

    def read_settings(self) -> RunSettings:
        """The run's settings (run.json)."""
        return msgspec.json.decode(bounds.read_bytes(self.settings), type=RunSettings)

    def load_recipe(self) -> tuple[Recipe | None, str]:
        """The run's recipe copy with the run's `--model-path`/`--max-steps` applied, as (recipe, "");
        or (None, why) for a run without a usable copy (imported, hand-edited, from an older loratui).

        The one loader of a run's recipe: the copy alone may lack `[model] path` that the command line
        gave, so loading it without the run's settings would refuse a run that started fine; and the
        model was checked when the run started, so a copy without one (imported) is still its record.
        """
        if not self.recipe.is_file():
            return None, f"{self.recipe}: the run has no recipe copy"
        try:
            if bounds.read_text(self.recipe, errors="replace").startswith(IMPORTED_MARK):
                return None, "an imported run: loratui did not start it, so it has no recipe"
        except OSError as exc:
            return None, f"{self.recipe}: cannot read it ({exc.strerror or exc})"
        try:
            settings: RunSettings | None = self.read_settings()
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            settings = None  # an imported run has no run.json: the copy stands alone
        try:
            return load_recipe(self.recipe, model_path=settings.model_path if settings else None,
                               max_steps=settings.max_steps if settings else None, require_model=False), ""
        except RecipeError as exc:
            return None, str(exc)

    def supervisor_pid(self) -> int | None:
        """The live supervisor's pid, or None when it is gone (a zombie or a reused pid counts as gone)."""
        return live_pid(self.pidfile)

    def trainer_pid(self) -> int | None:
        """The live trainer's (rank 0's) pid, or None: it may outlive a killed supervisor."""
        return live_pid(self.trainer_pidfile)


def seal(run: RunDir) -> None:
    """Sign what the run would execute with this user's key (`RunDir.sealed`); nothing without a key."""
    tag = sign(run.sealed_bytes())
    if tag is not None:
        replace_file(run.seal_file, tag.encode("ascii"), 0o600)


def write_pidfile(pidfile: Path, pid: int | None = None) -> None:
    """Record `pid` (default: this process) with its start time, so a reused pid is never taken for it."""
    proc = psutil.Process(pid)
    stamp = start_stamp(proc.pid)
    text = f"{proc.pid} {proc.create_time():.3f}" + (f" {stamp}" if stamp else "")
    text += f" host={node_name()}\n"
    replace_file(pidfile, text.encode("ascii"))  # a new file: never written through a link at that name


def node_name() -> str:
    """This host as Slurm names it inside a job (SLURMD_NODENAME), else its short hostname: a run directory
    on a shared filesystem is read from hosts where its writers' pids mean nothing."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def pid_host(pidfile: Path) -> str:
    """The host whose process a pidfile names ('' for a pidfile of an older loratui, or none)."""
    try:
        hosts = [f[5:] for f in bounds.read_text(pidfile, errors="replace").split() if f.startswith("host=")]
    except OSError:
        return ""
    return hosts[0] if hosts else ""


def start_stamp(pid: int) -> str | None:
    """When process `pid` started, in a unit no clock step moves: the boot's id and the start in clock
    ticks since boot (/proc/PID/stat field 22). psutil's create_time is boot time plus those ticks, and
    the kernel's boot time follows the wall clock: a stepped clock (NTP, a resumed VM; 41 s seen on the
    CI box) moved every process's create_time, so live runs read as dead. None without /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}:{int(stat.rsplit(')', 1)[1].split()[19])}"
    except (OSError, ValueError, IndexError):
        return None


def live_pid(pidfile: Path) -> int | None:
    """The pid in `pidfile` if that very process still lives and is no zombie (nobody reaped it yet)."""
    try:
        fields = [f for f in bounds.read_text(pidfile).split() if not f.startswith("host=")]
        pid = int(fields[0])
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        stamp = start_stamp(pid) if len(fields) > 2 else None
        if stamp is not None:
            if stamp != fields[2]:
                return None  # the pid was reused by another process (or this is another boot)
        elif len(fields) > 1:
            if not abs(proc.create_time() - float(fields[1])) <= 0.01:  # `not <=`: a NaN time is no match
                return None  # the same check where /proc is missing, or a pidfile of an older loratui
        else:
            return None  # a bare pid proves nothing (a copied run dir's `1` is init): not our process
    except (OSError, ValueError, IndexError, psutil.NoSuchProcess):
        return None
    except psutil.AccessDenied:
        return pid  # another user's process: alive, and not ours to inspect
    return pid


def write_private(path: Path, data: bytes) -> None:
    """Replace `path` with `data`, readable by the owner only (0600) from its first byte."""
    replace_file(path, data, 0o600)


def replace_file(path: Path, data: bytes, mode: int = 0o666) -> None:
    """Replace `path` with `data` whole, so no reader sees half of it: written to a new file beside it (one
    per process and thread, O_EXCL, never through a link; `mode` less the umask) and renamed over it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


class CommandTail:
    """The commands appended to a run's `control.cmds` since an offset, a whole line at a time (a line still
    being written waits for its newline). The one reader of the file: the trainer at its step boundaries,
    the keeper for a command whose supervisor died."""

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path, self.offset = path, offset

    def new(self) -> list[str]:
        """The complete commands appended since the last call (a stat when there are none)."""
        if file_size(self.path) <= self.offset:
            return []
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except OSError:
            return []
        complete = data[:data.rfind(b"\n") + 1]
        self.offset += len(complete)
        return [line.strip() for line in complete.decode("utf-8", "replace").splitlines() if line.strip()]


def file_size(path: Path | str) -> int:
    """A file's size in bytes, 0 when it does not exist (yet)."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def default_runs_dir() -> Path:
    """`$LORATUI_RUNS` or ./runs."""
    return Path(os.environ.get("LORATUI_RUNS", "runs"))


MAX_NAME = 80
"""Run names are cut to this many characters in the id (a file name must stay under 255 bytes)."""


def new_run_id(name: str, now: float | None = None) -> str:
    """A sortable, readable id: 20261202-154501-tiny."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now if now is not None else time.time()))
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.")[:MAX_NAME] or "run"
    return f"{stamp}-{safe}"


def create(runs_dir: Path, settings: RunSettings, recipe_text: str) -> RunDir:
    """Make the run directory (0700) with its recipe copy and settings."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    path = runs_dir / settings.run_id
    suffix = 1
    while True:
        try:
            path.mkdir(mode=0o700)  # atomic: two runs started in the same second never share a folder
            break
        except FileExistsError:  # a run, a file, or a dangling symlink: take the next name
            suffix += 1
            path = runs_dir / f"{settings.run_id}-{suffix}"
    os.chmod(path, 0o700)
    run = RunDir(path)
    if path.name != settings.run_id:
        settings = msgspec.structs.replace(settings, run_id=path.name)
    run.recipe.write_text(recipe_text, encoding="utf-8")
    run.settings.write_bytes(msgspec.json.format(msgspec.json.encode(settings)))
    run.checkpoints.mkdir()
    remember_run(path)  # so `ls` and `attach` find it from any directory
    seal(run)
    return run


def list_runs(runs_dir: Path, everywhere: bool = False) -> list[RunDir]:
    """Every run directory under `runs_dir`, oldest first; with `everywhere`, also every run this user
    started elsewhere (the user's list, userstate.remembered_runs), each once."""
    try:
        entries = list(runs_dir.iterdir()) if runs_dir.is_dir() else []
    except OSError:
        entries = []
    if everywhere:
        entries += remembered_runs()
    found = {os.path.realpath(p): RunDir(p) for p in entries if _readable_run(p)}
    return sorted(found.values(), key=lambda r: (r.path.name, str(r.path)))


def where(runs_dir: Path, everywhere: bool) -> str:
    """Where runs were looked for, for a message (a directory that does not exist is said not to: a mistyped
    --runs-dir read as an empty one)."""
    place = f"{runs_dir}/" if runs_dir.is_dir() else f"{runs_dir}/ (no such directory)"
    return f"{place} nor anywhere else you started one" if everywhere else place


def _readable_run(path: Path) -> bool:
    """A run directory this user can read (a shared runs dir may hold other users' 0700 runs)."""
    try:
        return (path / "events.jsonl").is_file() and os.access(path / "events.jsonl", os.R_OK)
    except OSError:
        return False


def resolve(name: str | None, runs_dir: Path, everywhere: bool = False) -> RunDir:
    """The run a user named: a path, an id, a Slurm job id, or a unique id prefix or suffix; None means the
    newest.
    `everywhere`: among the runs this user started anywhere too, not only under `runs_dir`.

    A name that fits several runs is refused with the candidates: a command that stops or restarts a run
    must never guess. (`loratui` commands pass None only after looking for the running run first.)
    """
    if name:
        direct = Path(name)
        if (direct / "events.jsonl").exists():
            return RunDir(direct)
        if direct.name == "events.jsonl" and direct.exists():
            return RunDir(direct.parent)
    runs = list_runs(runs_dir, everywhere)
    if not runs:
        raise RunNotFound(f"no runs in {where(runs_dir, everywhere)}; start one with `loratui run tiny`"
                          " or pass --runs-dir")
    if not name:
        return runs[-1]
    matches = [r for r in runs if r.run_id == name] or _named_or_job(name, runs) or [
        r for r in runs if r.run_id.startswith(name) or r.run_id.endswith(name)] or _at_time(name, runs)
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise RunNotFound(f"no run named {name!r} in {where(runs_dir, everywhere)}; `loratui ls` lists them")
    ids = [r.run_id for r in matches]
    listed = ", ".join(r.run_id if ids.count(r.run_id) == 1 else str(r.path) for r in matches[-6:])
    raise RunNotFound(f"{name!r} fits {len(matches)} runs ({listed}); name one by its full id")


_STAMP = re.compile(r"\d{8}-\d{6}-")
"""The start time that `new_run_id` puts before a run's own name."""


def _named_or_job(name: str, runs: list[RunDir]) -> list[RunDir]:
    """For a number: the runs whose own name it is, else the newest run Slurm job `name` started (`loratui
    attach 4242`). Here, so that every command and the agent interface take a job id alike; a run the user
    named `4242` wins, as the name is what they chose."""
    if not name.isdigit():
        return []
    own = [r for r in runs if _own_name(r.run_id) == name]
    if own:
        return own
    from loratui import runstatus  # here: runstatus imports this module

    return [r for r in runs if runstatus.read(r).job_id == name][-1:]


_TIME = re.compile(r"(\d\d):?(\d\d)(?::?(\d\d))?")
"""The time part of a run's id as a user types it: `004953`, `0049`, `00:49:53` or `00:49`."""


def _at_time(name: str, runs: list[RunDir]) -> list[RunDir]:
    """The runs whose id's start time is `name` (to the minute or the second), on any day: `loratui ls` shows
    `20261206-004953-tiny`, and `loratui attach 004953` or `00:49` names it."""
    typed = _TIME.fullmatch(name)
    if typed is None:
        return []
    time = "".join(part for part in typed.groups() if part)
    return [r for r in runs if _STAMP.match(r.run_id) and r.run_id[9:15].startswith(time)]


def _own_name(run_id: str) -> str:
    """The name a run was given: its id without the start time ('' for an id `new_run_id` did not make)."""
    stamp = _STAMP.match(run_id)
    return run_id[stamp.end():] if stamp else ""


def latest_checkpoint(checkpoints: Path) -> str | None:
    """The Trainer's newest complete `checkpoint-N` directory, or None.

    The Trainer writes `trainer_state.json` after the weights and the optimizer; a checkpoint without it
    was cut short (a full disk, a kill mid-save) and resuming from it would fail or load half a model.
    """
    found = [p for p in checkpoints.glob("checkpoint-*")
             if p.name.split("-")[-1].isdigit() and checkpoint_complete(p)]
    if not found:
        return None
    return str(max(found, key=lambda p: int(p.name.split("-")[-1])))


def checkpoint_step(checkpoint: str | None) -> int | None:
    """The step a `checkpoint-N` directory was saved at (0 for no checkpoint: a start from scratch), None for a
    path not named so."""
    if not checkpoint:
        return 0
    number = Path(checkpoint).name.rpartition("-")[2]
    return int(number) if Path(checkpoint).name.startswith("checkpoint-") and number.isdigit() else None


def checkpoint_complete(checkpoint: Path) -> bool:
    """Whether the Trainer finished writing this checkpoint (its trainer_state.json, written last, parses).

    The Trainer writes it with Python's json, which writes a NaN or infinite loss or grad_norm of its log_history as
    bare `NaN`/`Infinity`: strict JSON refuses them, and every checkpoint after a run's first NaN (an fp16 overflow's
    inf grad_norm too) was taken for cut short: a suspended run resumed "from None", at step 0."""
    try:
        data = (checkpoint / "trainer_state.json").read_bytes()
    except OSError:
        return False
    try:
        msgspec.json.decode(data)
    except msgspec.DecodeError:
        import json

        try:
            json.loads(data)  # Python's own dialect: NaN, Infinity, -Infinity
        except ValueError:  # cut short (a full disk, a kill mid-save), or not JSON at all
            return False
    return True


def stacks_file(run_path: Path, rank: str) -> Path:
    """Where trainer rank `rank` dumps its threads' stacks on SIGUSR1 (`loratui stacks`)."""
    return run_path / f"stacks.rank{rank}.txt"


PINNED_DIR = "saved"


def pin_checkpoint(checkpoint: Path) -> Path:
    """Keep a checkpoint saved on request out of the Trainer's rotation, which deletes only
    `checkpoints/checkpoint-*`: a hard-linked copy under `checkpoints/saved/` (no extra space; a plain
    copy where links cannot be made). Returns the kept copy."""
    target = checkpoint.parent / PINNED_DIR / checkpoint.name
    if target.exists():
        return target
    target.parent.mkdir(exist_ok=True)
    try:
        shutil.copytree(checkpoint, target, copy_function=os.link)
    except OSError:
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(checkpoint, target)
    return target
