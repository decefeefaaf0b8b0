"""Errors that end a command with one message, and the exit-code policy every command follows.

Exit codes: 0 ok; 1 the answer is no (a run that failed, `estimate` on a recipe that does not fit, `doctor`
that found an error); 2 bad input (one message naming the file, line, key or value; never a traceback).
"""

EXIT_OK, EXIT_NO, EXIT_BAD_INPUT = 0, 1, 2


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""


class ApplyError(Exception):
    """An advice's change cannot be applied (nothing to change, or the result would not validate)."""
