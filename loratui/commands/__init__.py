"""Subcommands beyond run/attach/ls/control, one module each.

Each module defines `register(sub, runs_dir_parent) -> parser` (adds its argparse subparser; the CLI binds
the module's `main`) and `main(args) -> int` (runs it; raises `loratui.errors.UsageError` for bad input).
Imports stay light at module level: every one of them loads whenever the CLI parses.
"""
