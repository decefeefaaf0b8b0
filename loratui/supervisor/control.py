"""The control channel: a Unix socket (0600, inside the 0700 run directory) owned by the supervisor.

A client sends one JSON line `{"command": "pause"}` and reads one JSON line back:
`{"ok": true}` or `{"ok": false, "error": "..."}`.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

import msgspec

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


def serve_one(conn: socket.socket, handle: HandleFn) -> None:
    """Read one request from `conn`, pass it to `handle`, write the reply."""
    try:
        conn.settimeout(5.0)
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
    server.listen(8)
    return server

