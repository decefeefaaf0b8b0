"""Errors that end a command with one line and exit code 2 (bad input, never a traceback)."""


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""
