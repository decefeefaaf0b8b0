"""Alerts off the box, sent by the supervisor (so they still go out when the trainer is killed).

Channels: an ntfy topic URL, a generic JSON webhook, and Slack and Discord incoming webhooks; the format is
guessed from the URL unless `[alerts] format` names it. Sending never blocks the caller: alerts go into a
bounded queue that one background thread posts (urllib, a timeout, retries with back-off). Each kind of
event is sent at most once per `min_interval_s`; the run's end and guard actions always go.

The URL is a secret, and a fact of the run: `loratui run` stores it (`--notify URL`, else the variable
`[alerts] url_env` names, read at launch) in a 0600 file of the user's state directory keyed by the run
(`RunDir.alerts`; never inside the run directory, which users copy into bug reports), so every supervisor
of the run uses it again: one re-adopting a suspended run (`loratui resume`, which may pass a new `--notify`)
and the run a restart with applied advice starts. It is never written to the event log, run.json,
status.json or the screen, nor given to the trainer; messages name the host at most.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from loratui.errors import UsageError
from loratui.rundir import RunDir, write_private
from loratui.supervisor import apprise_channel

NOTIFY_ENV = "LORATUI_NOTIFY_URL"
"""A variable the user may export instead of passing `--notify URL` (read at launch, and by notify-test)."""
ALWAYS = frozenset({"finished", "failed", "guard", "test"})
"""Events never held back by the rate limit."""


@dataclass(frozen=True)
class Alert:
    """One message: the event kind, a short title, the body."""

    event: str
    title: str
    message: str
    run_id: str = ""
    urgent: bool = False


def detect_format(url: str) -> str:
    """'slack', 'discord', 'ntfy' or 'json', from the URL's host and path; 'apprise' for any other scheme."""
    if apprise_channel.is_apprise_url(url):
        return "apprise"
    parts = urllib.parse.urlsplit(url)
    host, path = parts.hostname or "", parts.path
    if host.endswith("hooks.slack.com"):
        return "slack"
    if host.endswith(("discord.com", "discordapp.com")) and "/api/webhooks/" in path:
        return "discord"
    if "ntfy" in host:
        return "ntfy"
    return "json"


def payload(fmt: str, alert: Alert) -> tuple[bytes, dict[str, str]]:
    """The request body and headers of `alert` in the channel's format."""
    text = f"{alert.title}\n{alert.message}".strip()
    if fmt == "ntfy":  # the body is the message; title, priority and tags ride in headers (ASCII only)
        headers = {"Title": _ascii(alert.title), "Tags": f"loratui,{alert.event}",
                   "Priority": "high" if alert.urgent else "default", "Content-Type": "text/plain; charset=utf-8"}
        return alert.message.encode("utf-8"), headers
    if fmt == "slack":
        body: dict[str, Any] = {"text": text}
    elif fmt == "discord":
        body = {"content": text[:2000]}  # Discord refuses longer content
    else:
        body = {"event": alert.event, "title": alert.title, "message": alert.message, "run": alert.run_id,
                "urgent": alert.urgent, "source": "loratui"}
    return json.dumps(body).encode("utf-8"), {"Content-Type": "application/json"}


def _ascii(text: str) -> str:
    return text.encode("ascii", "replace").decode("ascii")


def where(url: str) -> str:
    """The URL's host, to name the endpoint in an error without giving the secret away."""
    if apprise_channel.is_apprise_url(url):  # its "host" may be a bot token
        return apprise_channel.service(url)
    return urllib.parse.urlsplit(url).hostname or "the endpoint"


def post(url: str, fmt: str, alert: Alert, timeout: float = 10.0) -> None:
    """Send one alert now (raises OSError / urllib errors on failure)."""
    if fmt == "apprise" or apprise_channel.is_apprise_url(url):
        apprise_channel.send(url, alert.title, alert.message, alert.urgent)
        return
    body, headers = payload(fmt, alert)
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (the user's URL)
        response.read(1024)


class Notifier:
    """Queues alerts and posts them from a background thread: rate-limited, retried, never blocking."""

    def __init__(self, url: str, fmt: str = "auto", min_interval_s: float = 60.0, retries: int = 4,
                 backoff_s: float = 2.0, timeout_s: float = 10.0, clock: Callable[[], float] = time.monotonic,
                 on_error: Callable[[str], None] | None = None) -> None:
        self.url, self.fmt = url, detect_format(url) if fmt == "auto" else fmt
        self.min_interval_s, self.retries, self.backoff_s, self.timeout_s = min_interval_s, retries, backoff_s, timeout_s
        self.clock, self.on_error = clock, on_error or (lambda message: None)
        self._queue: queue.Queue[Alert | None] = queue.Queue(maxsize=100)
        self._last: dict[str, float] = {}
        self._closing = threading.Event()
        self.sent, self.failed = 0, 0
        self._thread = threading.Thread(target=self._run, daemon=True, name="loratui-alerts")
        self._thread.start()

    def send(self, alert: Alert) -> bool:
        """Queue `alert` unless its kind was sent within `min_interval_s` (or the queue is full)."""
        now = self.clock()
        last = self._last.get(alert.event)
        if alert.event not in ALWAYS and last is not None and now - last < self.min_interval_s:
            return False
        try:
            self._queue.put_nowait(alert)
        except queue.Full:
            return False
        self._last[alert.event] = now
        return True

    def close(self, timeout_s: float = 30.0) -> None:
        """Deliver what is queued (within `timeout_s`), then stop the thread."""
        try:
            self._queue.put(None, timeout=1.0)
        except queue.Full:
            pass
        self._thread.join(timeout_s)
        self._closing.set()  # cut any back-off still waiting

    def _run(self) -> None:
        while True:
            alert = self._queue.get()
            if alert is None:
                return
            self._deliver(alert)

    def _deliver(self, alert: Alert) -> None:
        delay = self.backoff_s
        for attempt in range(self.retries + 1):
            try:
                post(self.url, self.fmt, alert, self.timeout_s)
                self.sent += 1
                return
            except (OSError, ValueError, urllib.error.URLError) as exc:
                reason = getattr(exc, "reason", None) or getattr(exc, "code", None) or type(exc).__name__
                error = f"alert to {where(self.url)} failed (attempt {attempt + 1}): {reason}"
            if attempt < self.retries and self._closing.wait(delay):
                break
            delay *= 2
        self.failed += 1
        self.on_error(error)


def url_from_env(alerts: Any, environ: dict[str, str] | None = None) -> str:
    """The alert URL from the environment: LORATUI_NOTIFY_URL, else the variable `[alerts] url_env` names."""
    environ = os.environ if environ is None else environ
    return environ.get(NOTIFY_ENV) or (environ.get(alerts.url_env, "") if alerts.url_env else "")


class Target(msgspec.Struct, frozen=True):
    """The file `RunDir.alerts`: where a run's alerts go."""

    url: str


def is_http(url: str) -> bool:
    return url.startswith(("http://", "https://"))


def check_url(url: str, flag: str = "--notify") -> str:
    """`url` if it is an http(s) or Apprise URL; else one message that does not repeat it (a secret)."""
    if apprise_channel.is_apprise_url(url):
        apprise_channel.check(url, flag)
        return url
    if not is_http(url):
        raise UsageError(f"{flag}: expected an http(s) URL (an ntfy topic such as https://ntfy.sh/TOPIC, or a "
                         "Slack, Discord or JSON webhook)")
    return url


def save_target(run: RunDir, url: str) -> None:
    """Make `url` where the run's alerts go (RunDir.alerts, 0600); '' removes it."""
    if not url:
        run.alerts.unlink(missing_ok=True)
        return
    run.alerts.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_private(run.alerts, msgspec.json.encode(Target(url)))


def saved_target(run: RunDir) -> str:
    """Where the run's alerts go, as stored with it; '' when it has none (or the file is unusable)."""
    try:
        url = msgspec.json.decode(run.alerts.read_bytes(), type=Target).url
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return ""
    return url if is_http(url) or apprise_channel.is_apprise_url(url) else ""


def url_for_run(run: RunDir, alerts: Any, environ: dict[str, str] | None = None) -> str:
    """The run's stored target, else the environment's (a run from before targets were stored)."""
    return saved_target(run) or url_from_env(alerts, environ)


def describe(url: str, fmt: str = "auto") -> str:
    """Where alerts go, without the secret: 'ntfy at ntfy.sh'."""
    return f"{detect_format(url) if fmt == 'auto' else fmt} at {where(url)}"


def secret_names(alerts: Any) -> list[str]:
    """Environment variables that hold the secret (kept out of the trainer's environment)."""
    return [NOTIFY_ENV] + ([alerts.url_env] if alerts.url_env else [])
