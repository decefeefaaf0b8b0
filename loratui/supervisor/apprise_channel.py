"""Alerts through Apprise (an optional extra, `loratui[apprise]`): any Apprise URL a user already keeps for
Telegram, Matrix, e-mail, Pushover, Teams, Gotify, ntfy, Slack, Discord and a hundred more services.

An http(s) URL is still posted by alerts.py itself (no Apprise needed); any other scheme is an Apprise URL.
Its parts (bot tokens, passwords) are secrets like the rest of the URL: only the service's name is ever shown.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from loratui.errors import UsageError

INSTALL = "pip install 'loratui[apprise]'"


def is_apprise_url(url: str) -> bool:
    """A URL with a scheme other than http(s) (`tgram://...`, `mailto://...`, `json://...`)."""
    scheme = urllib.parse.urlsplit(url).scheme
    return bool(scheme) and scheme not in ("http", "https") and "://" in url


def service(url: str) -> str:
    """What to call the endpoint without giving its secret away: the scheme's service name."""
    return f"the {urllib.parse.urlsplit(url).scheme} service (Apprise)"


def _apprise(url: str = "") -> Any:
    try:
        import apprise
    except ImportError:
        # the scheme named: a mistyped `htps://` was told only to install Apprise
        scheme = f"{urllib.parse.urlsplit(url).scheme}:// is not http(s): " if url else ""
        raise UsageError(f"{scheme}an Apprise URL needs Apprise: {INSTALL} (or give an http(s) webhook)") from None
    return apprise


def check(url: str, flag: str) -> None:
    """Refuse, in one line that does not repeat the URL, one Apprise does not know."""
    if _apprise(url).Apprise.instantiate(url) is None:
        raise UsageError(f"{flag}: Apprise does not know this URL's service or cannot parse it "
                         f"({urllib.parse.urlsplit(url).scheme}://...); see Apprise's list of services")


def send(url: str, title: str, body: str, urgent: bool) -> None:
    """Send one notification now; OSError when the service did not take it."""
    apprise = _apprise()
    sender = apprise.Apprise()
    if not sender.add(url):
        raise ValueError(f"{service(url)}: not a usable Apprise URL")
    kind = apprise.NotifyType.FAILURE if urgent else apprise.NotifyType.INFO
    if not sender.notify(title=title, body=body or title, notify_type=kind):
        raise OSError(f"{service(url)} did not take the alert")
