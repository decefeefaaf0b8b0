"""`loratui notify-test [URL] [--recipe R]`: send one test alert, to check the endpoint before a long run.

The URL comes from the argument, else `LORATUI_NOTIFY_URL`, else the variable a recipe's `[alerts] url_env`
names. It is never printed: errors name the host only.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(sub: Any, runs_dir_parent: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the `notify-test` subparser."""
    cmd = sub.add_parser("notify-test", help="send one test alert (ntfy, Slack, Discord or JSON webhook)")
    cmd.add_argument("url", nargs="?", default=None, help="the endpoint (default: $LORATUI_NOTIFY_URL or the "
                                                          "recipe's url_env)")
    cmd.add_argument("--recipe", type=Path, default=None, help="take url_env and format from this recipe")
    cmd.add_argument("--format", default=None, choices=("auto", "ntfy", "json", "slack", "discord"))
    return cmd


def main(args: argparse.Namespace) -> int:
    """Send the test message; exit 0 when the endpoint took it, 1 when it did not."""
    import socket

    from loratui.errors import EXIT_NO, EXIT_OK, UsageError
    from loratui.recipe import AlertsSection, load_recipe
    from loratui.supervisor import alerts

    section = load_recipe(args.recipe).alerts if args.recipe else AlertsSection()
    url = args.url or alerts.url_from_env(section)
    if not url and section.url_env:
        raise UsageError(f"{args.recipe}: [alerts] url_env names {section.url_env}, which is not set here; "
                         f"export {section.url_env}=URL (or pass the URL to notify-test)")
    if not url:
        raise UsageError("no alert URL: pass one (loratui notify-test https://ntfy.sh/TOPIC), export "
                         f"{alerts.NOTIFY_ENV}, or name a variable with [alerts] url_env in --recipe")
    alerts.check_url(url, "notify-test")
    fmt = args.format or section.format
    guessed = fmt == "auto"
    fmt = alerts.detect_format(url) if guessed else fmt
    alert = alerts.Alert("test", "loratui: test alert", f"alerts from {socket.gethostname()} reach you here",
                         "notify-test")
    try:
        reply = alerts.post(url, fmt, alert)
        if guessed and fmt == "json" and alerts.is_ntfy_reply(reply):
            # a self-hosted ntfy on a host that does not say "ntfy": it showed the JSON as the message text
            print(f"loratui: {alerts.where(url)} answered as an ntfy server, which showed the JSON alert as text; "
                  "sent again in ntfy's format (a run's alerts switch to it after their first; a recipe's "
                  '[alerts] format = "ntfy", or notify-test --format ntfy, names it from the start)')
            fmt = "ntfy"
            alerts.post(url, fmt, alert)
    except Exception as exc:  # urllib's errors, a refused connection, a bad host: one line, no URL
        reason = alerts.failure_reason(exc)
        print(f"loratui: notify-test: {alerts.where(url)} did not take the alert ({fmt} format): {reason}")
        return EXIT_NO
    print(f"loratui: test alert sent to {alerts.where(url)} ({fmt} format)")
    return EXIT_OK
