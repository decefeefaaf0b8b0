"""The header loratui writes first in a fixed recipe or config copy: what advice it applied.

A copy fixed again (a run started from `x.fix-a.toml`, then `A` on that run) kept the first copy's header under
its own, one more stacked line each time. There is one header: one application says it on one line, as it always
did; more list every one, oldest first.
"""

from __future__ import annotations

LEAD = "Written by loratui"
ONE = f"{LEAD} from "
MANY = f"{LEAD}; advice applied, oldest first:"
ITEM = "  "


def split(text: str) -> tuple[list[str], str]:
    """(the applications named by loratui's header at the top of `text`, `text` without that header)."""
    entries: list[str] = []
    rest = text
    listing = False
    while rest:
        line, newline, after = rest.partition("\n")
        bare = line.rstrip("\r").removeprefix("#").removeprefix(" ")
        if not line.startswith("#"):
            break
        if bare.startswith(ONE) and not listing:
            entries.append(bare[len(ONE):])
        elif bare == MANY and not entries:
            listing = True
        elif listing and bare.startswith(ITEM) and bare.strip():
            entries.append(bare.strip())
        else:
            break
        rest = after if newline else ""
    return entries, rest


def lines(entries: list[str]) -> list[str]:
    """The header's lines, without their `# `: one application on one line, more as a list."""
    if len(entries) == 1:
        return [ONE + entries[0]]
    return [MANY] + [ITEM + entry for entry in entries]


def with_header(text: str, entry: str) -> str:
    """`text` (a TOML recipe) with one header naming its earlier applications and `entry`."""
    entries, rest = split(text)
    return "".join(f"# {line}\n" for line in lines([*entries, entry])) + rest
