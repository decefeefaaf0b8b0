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

An alert URL is also a way out of the box: a URL with a CR/LF would smuggle headers, and one to a link-local
or cloud metadata address (169.254.169.254, metadata.google.internal...) would make the supervisor talk to
the instance's credentials service. Such URLs are refused when given (`check_url`), and every connection is
checked again on the address it really reaches (a name that resolves there, a decimal IPv4), so a refused
address is never sent a byte. The sending thread outlives any failure, and its errors never hold the URL.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import queue
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from http.client import HTTPConnection, HTTPSConnection
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


BLOCKED_NAMES = frozenset({"metadata.google.internal", "metadata.goog", "metadata", "instance-data",
                           "instance-data.ec2.internal"})
"""Cloud metadata services by name (GCP, AWS)."""
BLOCKED_NETS = tuple(ipaddress.ip_network(net) for net in (
    "169.254.0.0/16",  # IPv4 link-local: AWS, GCP, Azure, OpenStack metadata at 169.254.169.254
    "fe80::/10",  # IPv6 link-local
    "100.100.100.200/32",  # Alibaba Cloud metadata
    "fd00:ec2::254/128",  # AWS metadata over IPv6
))


def blocked_address(address: str) -> bool:
    """Whether an IP address (a literal, IPv4-mapped IPv6 too) is link-local or a cloud metadata service."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])  # fe80::1%eth0: the zone is no part of it
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return any((mapped or ip) in net for net in BLOCKED_NETS if net.version == (mapped or ip).version)


def blocked_host(host: str) -> bool:
    """Whether a URL's host names a link-local or metadata address without resolving it (a name, an IP in
    any form the resolver takes: 169.254.169.254, 2852039166, 0xa9fea9fe)."""
    host = host.lower().rstrip(".")
    if host in BLOCKED_NAMES or blocked_address(host):
        return True
    try:
        return blocked_address(socket.inet_ntoa(socket.inet_aton(host)))
    except OSError:
        return False


def url_problem(url: str) -> str:
    """Why `url` cannot be an alert target ('' when it can), in words that do not repeat it (a secret)."""
    if any(ord(ch) <= 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in url):
        return ("the URL holds a space or a control character (a CR/LF pasted with it?); give it on one line, "
                "percent-encoded")
    try:
        parts = urllib.parse.urlsplit(url)
        web = parts.scheme in ("http", "https")  # an Apprise URL's "host:port" may be a bot id and its token
        host, _ = parts.hostname, parts.port if web else None
    except ValueError:  # `http://[::1`, a port that is no number (urllib's words would quote the URL)
        return "the URL is malformed; check the brackets around an IPv6 address and the port"
    if not host and web:
        return "the URL names no host"
    # Only a host an http(s) request will resolve is read in the resolver's legacy forms (2852039166): an
    # Apprise "host" can be a Telegram bot's number.
    if host and (blocked_host(host) if web else host.rstrip(".") in BLOCKED_NAMES or blocked_address(host)):
        return (f"{host} is a link-local or cloud metadata address, never an alert endpoint; give your ntfy, "
                "Slack, Discord or webhook URL")
    return ""


def detect_format(url: str) -> str:
    """'slack', 'discord', 'ntfy' or 'json', from the URL's host and path; 'apprise' for any other scheme."""
    if url_problem(url):
        return "json"  # never sent: `post` refuses it; this only names a format
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
    if fmt == "ntfy":  # the body is the message; title, priority and tags ride in headers (RFC 2047 if not ASCII)
        headers = {"Title": _header(alert.title), "Tags": f"loratui,{alert.event}",
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


def _header(text: str) -> str:
    """`text` as a header value ntfy reads whole: as it is when ASCII, else RFC 2047 base64, which ntfy's docs
    give for UTF-8 titles (`?` stood for each non-ASCII letter of a run's name)."""
    text = " ".join(text.split())
    if text.isascii():
        return text
    return "=?UTF-8?B?" + base64.b64encode(text.encode("utf-8")).decode("ascii") + "?="


def credentials(url: str) -> tuple[str, str]:
    """(the URL without its user:password@, the Authorization header's value, '' when none). ntfy's
    self-hosted topics take Basic auth (`curl -u phil:mypass`, `-u :tk_TOKEN` for an access token), which
    `https://phil:mypass@host/topic` says; urllib sent that host to the resolver whole ("Name or service not
    known")."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or "@" not in parts.netloc:
        return url, ""
    user = urllib.parse.unquote(parts.username or "")
    password = urllib.parse.unquote(parts.password or "")
    host = parts.netloc.rpartition("@")[2]
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), f"Basic {token}"


def is_ntfy_reply(reply: bytes) -> bool:
    """Whether an endpoint's answer to a post is ntfy's (the published message: id, time, event "message",
    topic): a self-hosted ntfy whose host does not say "ntfy" took a JSON body for the message text."""
    try:
        answer = json.loads(reply.decode("utf-8", "replace").splitlines()[0] if reply else "")
    except (ValueError, IndexError):
        return False
    return isinstance(answer, dict) and answer.get("event") == "message" and "topic" in answer and "id" in answer


def where(url: str) -> str:
    """The URL's host, to name the endpoint in an error without giving the secret away."""
    if url_problem(url):
        return "the endpoint"
    if apprise_channel.is_apprise_url(url):  # its "host" may be a bot token
        return apprise_channel.service(url)
    return urllib.parse.urlsplit(url).hostname or "the endpoint"


class RefusedAddress(OSError):
    """The endpoint resolved to a link-local or cloud metadata address: nothing was sent."""


class RefusedURL(ValueError):
    """A URL `url_problem` refuses (its message never repeats the URL): nothing was sent."""


def _guarded_connection(address: tuple[str, int], timeout: Any = socket._GLOBAL_DEFAULT_TIMEOUT,  # type: ignore[attr-defined]
                        source_address: Any = None) -> socket.socket:
    """socket.create_connection, to the first address of the name that is not refused: each is checked
    as resolved and connected to as is, so a name that changes its answer meanwhile gains nothing."""
    host, port = address
    found = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
    allowed = [info for info in found if not blocked_address(str(info[4][0]))]
    if not allowed:
        raise RefusedAddress(f"{host} resolves to a link-local or cloud metadata address; not sent")
    error: OSError | None = None
    for family, kind, proto, _, where_to in allowed:
        sock = socket.socket(family, kind, proto)
        try:
            if timeout is not socket._GLOBAL_DEFAULT_TIMEOUT:  # type: ignore[attr-defined]
                sock.settimeout(timeout)
            if source_address:
                sock.bind(source_address)
            sock.connect(where_to)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
    raise error or OSError(f"cannot connect to {host}")


class _GuardedHTTP(HTTPConnection):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = _guarded_connection


class _GuardedHTTPS(HTTPSConnection):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = _guarded_connection


class _HTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_GuardedHTTP, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_GuardedHTTPS, req, context=self._context)  # type: ignore[attr-defined]


_opener = urllib.request.build_opener(_HTTPHandler, _HTTPSHandler)
"""urllib with every connection checked (redirects and proxies included: each is a new connection)."""


def post(url: str, fmt: str, alert: Alert, timeout: float = 10.0) -> bytes:
    """Send one alert now and return the start of the answer (raises OSError / urllib errors on failure,
    ValueError for a refused URL). A URL's user:password@ goes as Basic auth, never to a redirect's host."""
    problem = url_problem(url)
    if problem:
        raise RefusedURL(problem)
    if fmt == "apprise" or apprise_channel.is_apprise_url(url):
        apprise_channel.send(url, alert.title, alert.message, alert.urgent)
        return b""
    body, headers = payload(fmt, alert)
    url, authorization = credentials(url)
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    if authorization:
        request.add_unredirected_header("Authorization", authorization)
    with _opener.open(request, timeout=timeout) as response:
        return bytes(response.read(1024))


def failure_reason(exc: BaseException) -> str:
    """Why a send failed, without the URL: an HTTP status, a socket error, our own refusal, else the
    exception's type (http.client's messages quote the URL, and so does urllib's `ValueError`)."""
    if isinstance(exc, urllib.error.HTTPError):
        if exc.code in (401, 403):  # ntfy's answer to a protected topic, without or with a wrong login
            return (f"HTTP {exc.code} (the endpoint wants a login: give it in the URL as "
                    "https://USER:PASSWORD@host/topic, or https://:TOKEN@host/topic for an ntfy access token)")
        return f"HTTP {exc.code}"
    if isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        return failure_reason(reason) if isinstance(reason, BaseException) else type(exc).__name__
    if isinstance(exc, (RefusedAddress, RefusedURL)):
        return str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return type(exc).__name__


class Notifier:
    """Queues alerts and posts them from a background thread: rate-limited, retried, never blocking."""

    def __init__(self, url: str, fmt: str = "auto", min_interval_s: float = 60.0, retries: int = 4,
                 backoff_s: float = 2.0, timeout_s: float = 10.0, clock: Callable[[], float] = time.monotonic,
                 on_error: Callable[[str], None] | None = None) -> None:
        self.url, self.fmt = url, detect_format(url) if fmt == "auto" else fmt
        self.guessed = fmt == "auto"
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
            try:
                self._deliver(alert)
            except Exception as exc:  # noqa: BLE001 (the thread must live on for the next alert)
                self.failed += 1
                self._report(f"alert to {where(self.url)} failed: {type(exc).__name__}")

    def _deliver(self, alert: Alert) -> None:
        delay = self.backoff_s
        problem = url_problem(self.url)
        for attempt in range(1 if problem else self.retries + 1):  # a refused URL is not retried
            try:
                reply = post(self.url, self.fmt, alert, self.timeout_s)
                self.sent += 1
                if self.guessed and self.fmt == "json" and is_ntfy_reply(reply):
                    # a self-hosted ntfy on a host that does not say so: this alert again, and the later ones, in its
                    # format (a run's one alert, "finished", was JSON text on the phone)
                    self.fmt = "ntfy"
                    self._report(f"alerts to {where(self.url)}: it answered as an ntfy server, which shows a JSON "
                                 "body as text; this alert is sent again, and later ones go, in ntfy's format "
                                 "([alerts] format = \"ntfy\" in a recipe says so from the first)")
                    post(self.url, self.fmt, alert, self.timeout_s)
                return
            except Exception as exc:  # noqa: BLE001 (http.client raises its own types, quoting the URL)
                error = f"alert to {where(self.url)} failed (attempt {attempt + 1}): {failure_reason(exc)}"
            if attempt < self.retries and not problem and self._closing.wait(delay):
                break
            delay *= 2
        self.failed += 1
        self._report(error)

    def _report(self, error: str) -> None:
        try:
            self.on_error(error)
        except Exception:  # noqa: BLE001 (a log that cannot be written must not end the alerts)
            pass


def env_url_checked(alerts: Any, environ: dict[str, str] | None = None) -> str:
    """`url_from_env`, refused in one message naming the variable when it is unusable (before a run starts)."""
    environ = os.environ if environ is None else environ
    url = url_from_env(alerts, environ)
    if url:
        name = NOTIFY_ENV if environ.get(NOTIFY_ENV) else f"{alerts.url_env} ([alerts] url_env)"
        check_url(url, f"${name}")
    return url


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
    problem = url_problem(url)
    if problem:
        raise UsageError(f"{flag}: {problem}")
    if apprise_channel.is_apprise_url(url):
        apprise_channel.check(url, flag)
        return url
    if not is_http(url):
        raise UsageError(f"{flag}: expected an http(s) URL (an ntfy topic such as https://ntfy.sh/TOPIC, or a "
                         "Slack, Discord or JSON webhook)")
    parts = urllib.parse.urlsplit(url)
    if detect_format(url) == "ntfy" and not parts.path.strip("/"):  # ntfy.sh answers a POST to / with an error
        host = parts.netloc.rpartition("@")[2]  # never its user:password
        raise UsageError(f"{flag}: an ntfy URL ends with its topic: {parts.scheme}://{host}/TOPIC (the topic "
                         "you subscribe to in the ntfy app)")
    return url


def save_target(run: RunDir, url: str) -> None:
    """Make `url` where the run's alerts go (RunDir.alerts, 0600); '' removes it."""
    if not url:
        run.alerts.unlink(missing_ok=True)
        return
    run.alerts.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_private(run.alerts, msgspec.json.encode(Target(url)))


def _stored_target(run: RunDir) -> str:
    try:
        return msgspec.json.decode(run.alerts.read_bytes(), type=Target).url
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return ""


def target_problem(url: str) -> str:
    """Why `url` is no usable target ('' when it is), without repeating it."""
    problem = url_problem(url)
    if not problem and not (is_http(url) or apprise_channel.is_apprise_url(url)):
        problem = "the URL is neither http(s) nor an Apprise URL"
    return problem


def saved_target(run: RunDir) -> str:
    """Where the run's alerts go, as stored with it; '' when it has none (or the file or URL is unusable)."""
    url = _stored_target(run)
    return "" if target_problem(url) else url


def target_for_run(run: RunDir, alerts: Any, environ: dict[str, str] | None = None) -> tuple[str, str]:
    """(url, '') for the run's stored target, else the environment's (a run from before targets were
    stored); ('', why) when that URL is unusable (stored by an older loratui, by hand, an odd variable)."""
    url = _stored_target(run) or url_from_env(alerts, environ)
    problem = target_problem(url) if url else ""
    return ("", problem) if problem else (url, "")


def url_for_run(run: RunDir, alerts: Any, environ: dict[str, str] | None = None) -> str:
    """The run's usable target ('' when none): see `target_for_run`."""
    return target_for_run(run, alerts, environ)[0]


def describe(url: str, fmt: str = "auto") -> str:
    """Where alerts go, without the secret: 'ntfy at ntfy.sh'."""
    return f"{detect_format(url) if fmt == 'auto' else fmt} at {where(url)}"


def secret_names(alerts: Any) -> list[str]:
    """Environment variables that hold the secret (kept out of the trainer's environment)."""
    return [NOTIFY_ENV] + ([alerts.url_env] if alerts.url_env else [])
