"""The user's own loratui state, outside every run directory: where a run's alerts go, and the key that
signs the replay indexes this user's loratui wrote.

Run directories travel (copied into bug reports, unpacked from a colleague's tarball, shared on a group
box), and whatever travels with them is as good as written by a stranger. What must not travel (a webhook
URL) or must not be trusted when it does (an index, a run's settings) is decided here, in
`$XDG_STATE_HOME/loratui` (by default `~/.local/state/loratui`), mode 0700.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

import platformdirs

KEY_BYTES = 32


def state_dir() -> Path:
    """`$XDG_STATE_HOME/loratui` (each writer creates what it writes into, 0700)."""
    return platformdirs.user_state_path("loratui")


_key_cache: dict[Path, bytes] = {}


def signing_key() -> bytes | None:
    """This user's secret for signing what loratui writes and must trust again later (created once, 0600);
    None when the state directory cannot be written (then nothing is signed, so nothing is trusted)."""
    path = state_dir() / "signing.key"
    if path in _key_cache:
        return _key_cache[path]
    try:
        state_dir().mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            key = _read_key(path)
        else:
            key = secrets.token_bytes(KEY_BYTES)
            with os.fdopen(fd, "wb") as handle:
                handle.write(key)
    except OSError:
        return None
    if key is not None:
        _key_cache[path] = key
    return key


def _read_key(path: Path) -> bytes | None:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        key = handle.read(KEY_BYTES + 1)
    # Another user's key, or one others may read, signs nothing of ours; a half-written one is not a key.
    if info.st_uid != os.getuid() or info.st_mode & 0o077 or len(key) != KEY_BYTES:
        return None
    return key


def new_signer() -> "hmac.HMAC | None":
    """An HMAC-SHA256 to feed; None when there is no key."""
    key = signing_key()
    return hmac.new(key, digestmod=hashlib.sha256) if key is not None else None


def _viewed_path(run_path: Path) -> Path:
    digest = hashlib.sha256(os.fsencode(os.path.realpath(run_path))).hexdigest()[:32]
    return state_dir() / "viewed" / digest


def last_viewed(run_path: Path) -> float | None:
    """When this user's viewer last showed the run (the newest event's time it had folded), or None."""
    try:
        return float(_viewed_path(run_path).read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None


def mark_viewed(run_path: Path, t: float) -> None:
    """Remember that the run was seen up to wall time `t` (for the "while you were away" card)."""
    path = _viewed_path(run_path)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temp = path.with_name(f"{path.name}.{os.getpid()}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(f"{t!r}\n")  # exact: a moment at the very time seen is not new
        os.replace(temp, path)
    except OSError:
        pass  # a read-only home: the card then shows the whole story next time, nothing worse


RUNS_LIST = "runs.list"
"""This user's run directories, one real path a line (append-only; loratui run adds each run it makes)."""

_PRUNE_AT = 256
"""Rewrite the list without runs that are gone once it holds this many lines and most are gone."""


def remember_run(run_path: Path) -> None:
    """Add a run directory to this user's list, so `loratui ls`/`attach` find it from any directory."""
    line = os.fsencode(os.path.realpath(run_path))
    if b"\n" in line:
        return  # a path with a newline cannot be one line; `--runs-dir` still finds the run
    try:
        state_dir().mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(state_dir() / RUNS_LIST, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            if os.fstat(fd).st_uid == os.getuid():  # a HOME shared with another user: their list, not ours
                os.write(fd, line + b"\n")  # one write on O_APPEND: two runs started at once never mix lines
        finally:
            os.close(fd)
    except OSError:
        pass  # a read-only home: the run is still found under its --runs-dir


def remembered_runs() -> list[Path]:
    """The run directories this user started that still hold a log, each once, in the order started: from this
    user's own list, and only the directories this user owns."""
    path = state_dir() / RUNS_LIST
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as handle:
            if os.fstat(fd).st_uid != os.getuid():
                return []  # another user's list (a HOME they share): their runs are not this user's to list
            lines = [line for line in handle.read().split(b"\n") if line]
    except OSError:
        return []
    kept = [Path(os.fsdecode(line)) for line in dict.fromkeys(lines)]
    kept = [run for run in kept if _own_run(run)]
    if len(lines) >= _PRUNE_AT and len(kept) < len(lines) // 2:
        _rewrite(path, b"".join(os.fsencode(run) + b"\n" for run in kept))
    return kept


def _own_run(path: Path) -> bool:
    """A run directory of this user's that still holds a log (root reads every run a list may name; only its own
    are its). One it may not look into (another user's 0700 run) is none: is_file() raised PermissionError, and
    `loratui ls` ended on it."""
    try:
        return path.stat().st_uid == os.getuid() and (path / "events.jsonl").is_file()
    except OSError:
        return False


def _rewrite(path: Path, data: bytes) -> None:
    """Replace the list (a run added meanwhile may be lost from it; `--runs-dir` still finds that run)."""
    temp = path.with_name(f"{path.name}.{os.getpid()}")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temp, path)
    except OSError:
        pass


def sign(data: bytes) -> str | None:
    """The HMAC of `data` with this user's key (hex); None when there is no key."""
    signer = new_signer()
    if signer is None:
        return None
    signer.update(data)
    return signer.hexdigest()


def signed(data: bytes, tag: str) -> bool:
    """Whether `tag` is this user's signature of `data` (made by `sign`)."""
    expected = sign(data)
    return expected is not None and hmac.compare_digest(expected, tag.strip())
