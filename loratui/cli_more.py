"""Wiring for the subcommands in `loratui.commands` (each module registers its own parser)."""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from loratui.commands import MODULES


def add_parsers(sub: Any, runs_dir: argparse.ArgumentParser) -> None:
    """Register every subcommand module that exists."""
    for name in MODULES.values():
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(sub, runs_dir)


def dispatch(args: argparse.Namespace) -> int:
    """Run the subcommand module named by `args.command`."""
    module = importlib.import_module(MODULES[args.command])
    return int(module.main(args))
