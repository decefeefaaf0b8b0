"""Subcommands beyond run/attach/ls/control, one module each.

Each module defines `register(sub, runs_dir_parent)` (adds its argparse subparser) and
`main(args) -> int` (runs it; raises `loratui.cli.UsageError` for bad input).
"""

MODULES = {
    "doctor": "loratui.commands.doctor",
    "estimate": "loratui.commands.estimate",
    "replay": "loratui.commands.replay",
    "import": "loratui.commands.importer",
}
