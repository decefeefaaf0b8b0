"""Subcommands beyond running and watching: replay, doctor, estimate, import (filled in as they land)."""

from __future__ import annotations

import argparse
from typing import Any


def add_parsers(sub: Any, runs_dir: argparse.ArgumentParser) -> None:
    """Register the extra subcommands."""


def dispatch(args: argparse.Namespace) -> int:
    """Run an extra subcommand."""
    raise SystemExit(f"loratui: unknown command {args.command}")
