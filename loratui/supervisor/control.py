"""The control channel: a Unix socket (0600, inside the 0700 run directory) owned by the supervisor.

A client sends one JSON line `{"command": "pause"}` and reads one JSON line back:
`{"ok": true}` or `{"ok": false, "error": "..."}`.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from loratui import events, runstatus
from loratui.eventlog import EventWriter
from loratui.rundir import RunDir, node_name, pid_host, replace_file
from loratui.safeio import UnsafeRunDir, check_run_dir

COMMANDS = ("pause", "resume", "suspend", "save", "stop")


class ControlError(Exception):
    """The command could not be delivered or was refused."""


class Request(msgspec.Struct, frozen=True):
    """One control request."""

    command: str
    source: str = "cli"


class Reply(msgspec.Struct, frozen=True):
    """The supervisor's answer."""

    ok: bool
    error: str = ""


HandleFn = Callable[[Request], "str | None"]
"""Handles one request; returns None when accepted, else the reason it was refused."""


def send(sock_path: Path, command: str, source: str = "cli", timeout: float = 5.0) -> None:
    """Send `command` to the run's supervisor; raise ControlError if it is refused or unreachable."""
    if command not in COMMANDS:
        raise ControlError(f"unknown command {command!r}; use one of {', '.join(COMMANDS)}")
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(timeout)
    try:
        client.connect(os.fspath(sock_path))
        client.sendall(msgspec.json.encode(Request(command, source)) + b"\n")
        data = _read_line(client)
    except (FileNotFoundError, ConnectionRefusedError):
        raise ControlError("the run is not running (no supervisor answers on its control socket)") from None
    except OSError as exc:
        raise ControlError(f"control socket error: {exc}") from None
    finally:
        client.close()
    try:
        reply = msgspec.json.decode(data, type=Reply)
    except msgspec.DecodeError:
        raise ControlError(f"unreadable reply from the supervisor: {data[:200]!r}") from None
    if not reply.ok:
        raise ControlError(reply.error)


def _read_line(conn: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
        if len(data) > 65536:
            break
    return data.strip()


MAX_CLIENTS = 64
CLIENT_TIMEOUT_S = 2.0


def serve(server: socket.socket, handle: HandleFn) -> None:
    """Accept clients until the socket closes, each on its own thread with a deadline, so an idle or slow
    client never holds up another (at most `MAX_CLIENTS` at once; more wait in the listen backlog)."""
    slots = threading.BoundedSemaphore(MAX_CLIENTS)
    while True:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        slots.acquire()
        threading.Thread(target=_serve_and_release, args=(conn, handle, slots), daemon=True).start()


def _serve_and_release(conn: socket.socket, handle: HandleFn, slots: threading.BoundedSemaphore) -> None:
    try:
        serve_one(conn, handle)
    finally:
        slots.release()


def serve_one(conn: socket.socket, handle: HandleFn) -> None:
    """Read one request from `conn`, pass it to `handle`, write the reply."""
    try:
        conn.settimeout(CLIENT_TIMEOUT_S)
        data = _read_line(conn)
        try:
            request = msgspec.json.decode(data, type=Request)
        except msgspec.DecodeError:
            reply = Reply(False, "bad request: expected one JSON line {\"command\": ...}")
        else:
            error = handle(request)
            reply = Reply(error is None, error or "")
        conn.sendall(msgspec.json.encode(reply) + b"\n")
    except OSError:
        pass
    finally:
        conn.close()


def listen(sock_path: Path) -> socket.socket:
    """A listening socket at `sock_path`, readable and writable by the owner only."""
    try:
        sock_path.unlink()
    except FileNotFoundError:
        pass
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        server.bind(os.fspath(sock_path))
    finally:
        os.umask(old_umask)
    os.chmod(sock_path, 0o600)
    server.listen(256)
    return server



def deliver(run: RunDir, command: str, source: str = "cli") -> str:
    """Send `command` to the run, whoever owns it now; returns what was done (for the user).

    The supervisor answers on its socket. When it is dead but the trainer lives on (an orphan), the command
    goes straight into `control.cmds`, which the trainer reads at each step boundary. A suspended run whose
    supervisor is gone is re-adopted by `resume`: a new supervisor restarts it from its last checkpoint.
    """
    host = pid_host(run.pidfile)
    if host and host != node_name() and runstatus.read(run).alive:
        return post(run, command, source, host)
    if run.supervisor_pid() is not None:
        send(run.control, command, source)
        return f"{command}: sent to {run.run_id}"
    if command not in COMMANDS:
        raise ControlError(f"unknown command {command!r}; use one of {', '.join(COMMANDS)}")
    try:  # every way on writes into the run directory: never through a link, never into another's files
        check_run_dir(run.path)
    except UnsafeRunDir as exc:
        raise ControlError(str(exc)) from None
    status = runstatus.read(run)
    if status.alive == "trainer":
        run.append_command(command)
        EventWriter(run.events).write(events.Control(t=time.time(), command=command, source=source))
        return f"{command}: written to {run.run_id}'s command file (its supervisor is gone; the trainer obeys)"
    if status.state == events.SUSPENDED and command == "resume":
        from loratui.supervisor.launch import spawn_supervisor

        _refuse_a_requeued_jobs_run(run, status)
        try:
            spawn_supervisor(run, adopt=True)
        except UnsafeRunDir as exc:
            raise ControlError(str(exc)) from None
        return f"resume: a new supervisor restarts {run.run_id} from its last checkpoint"
    if status.state == events.SUSPENDED and command == "stop":
        EventWriter(run.events).write(events.End(t=time.time(), state=events.STOPPED, step=status.step))
        return f"stop: {run.run_id} was suspended with no supervisor; recorded as stopped" + _waiting_job(status)
    raise ControlError(f"{run.run_id} is not running ({status.state}); nothing to {command}")


def _waiting_job(status: runstatus.Status) -> str:
    """What a stop of a run whose requeued Slurm job waits to start leaves to do: the job's next start would begin
    a new run from step 0 (trial 14: it did, and trained until scancel)."""
    from loratui import slurm

    job = slurm.job(status.job_id, fresh=True) if status.job_id else None
    if job is None or not (job.state == "PENDING" or job.state.startswith("REQUEUE")):
        return ""
    return (f"; its Slurm job {job.job_id} is {job.state} and its next start would begin a new run from step 0: "
            f"scancel {job.job_id}")


def _refuse_a_requeued_jobs_run(run: RunDir, status: runstatus.Status) -> None:
    """A run whose Slurm job waits to start again is resumed by that start (cli._requeued_run): a supervisor
    started here would run it outside the job, and the job's start would find it taken."""
    from loratui import slurm

    job = slurm.job(status.job_id, fresh=True) if status.job_id else None
    if job is not None and (job.state == "PENDING" or job.state.startswith("REQUEUE")):
        raise ControlError(f"resume: {run.run_id}'s Slurm job {job.job_id} is {job.state}: its next start resumes "
                           f"this run from its checkpoint (to start it sooner: scontrol update JobId={job.job_id} "
                           f"StartTime=now; to end it: loratui stop {run.run_id} and scancel {job.job_id})")


REPLY_WAIT_S = 20.0
INBOX_POLL_S = 0.5


def post(run: RunDir, command: str, source: str, host: str, wait_s: float = REPLY_WAIT_S) -> str:
    """Send `command` to a supervisor on another host through the shared run directory: one request file
    (written whole, then renamed), answered by a reply file beside it. A Unix socket on a shared
    filesystem reaches no process of another host, and appends to one file from two hosts may interleave."""
    if command not in COMMANDS:
        raise ControlError(f"unknown command {command!r}; use one of {', '.join(COMMANDS)}")
    run.inbox.mkdir(mode=0o700, exist_ok=True)
    name = f"{time.time_ns()}-{node_name()}-{os.getpid()}"
    replace_file(run.inbox / f"{name}.cmd", msgspec.json.encode(Request(command, source)), 0o600)
    reply_path = run.inbox / f"{name}.reply"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            reply = msgspec.json.decode(reply_path.read_bytes(), type=Reply)
        except (OSError, msgspec.DecodeError):
            time.sleep(0.1)
            continue
        reply_path.unlink(missing_ok=True)
        if not reply.ok:
            raise ControlError(reply.error)
        return f"{command}: sent to {run.run_id} on {host} (through its run directory)"
    return (f"{command}: written to {run.inbox}/{name}.cmd; its supervisor on {host} has not answered within "
            f"{wait_s:.0f} s (it reads that folder every {INBOX_POLL_S} s) and will act on it when it does")


def serve_inbox(run: RunDir, handle: HandleFn, stop: threading.Event) -> None:
    """Answer request files from other hosts until `stop` is set, oldest first, each once."""
    while not stop.wait(INBOX_POLL_S):
        try:
            waiting = sorted(run.inbox.glob("*.cmd"))
        except OSError:
            continue
        for path in waiting:
            try:
                data = path.read_bytes()
                path.unlink()  # taken: never handled twice
            except OSError:
                continue
            try:
                error = handle(msgspec.json.decode(data, type=Request))
            except msgspec.DecodeError:
                error = "bad request: expected {\"command\": ...}"
            try:
                replace_file(path.with_suffix(".reply"), msgspec.json.encode(Reply(error is None, error or "")),
                             0o600)
            except OSError:
                pass
