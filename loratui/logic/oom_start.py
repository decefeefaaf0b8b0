"""What the program printed of the card before it allocated anything: TensorFlow 1.x's device report (`Total memory:
7.92GiB`, `Free memory: 190.31MiB`) and the pool TensorFlow then sized from the free memory, which the driver may
refuse when something outside the program took it meanwhile. Read for an OOM whose message gives no numbers
(logic/oom.py reads the message). Pure logic."""

from __future__ import annotations

import re

from loratui.logic.oom import SIZE, gib, parse_size
from loratui.units import MIB

_AT_START = re.compile(r"\btotal ?memory:\s*" + SIZE + r"|\bfree ?memory:\s*" + SIZE, re.I)
"""TensorFlow 1.x's device report at start, before it allocates anything: `Total memory: 7.92GiB` then `Free memory:
190.31MiB`, or `totalMemory: 15.90GiB freeMemory: 3.12GiB` on one line."""


def memory_at_start(line: str) -> tuple[int | None, int | None]:
    """(total, free) bytes a framework's device report at start gives on this line (None where it gives none)."""
    total = free = None
    for match in _AT_START.finditer(line):
        if match.group(1) is not None:
            total = parse_size(match.group(1), match.group(2))
        else:
            free = parse_size(match.group(3), match.group(4))
    return total, free

_TF_POOL = re.compile(r"Created TensorFlow device \([^)]{0,200}?with (\d{1,9}) MB memory\)")
"""TensorFlow's device at start: the pool it sized from the memory the card reported free (`Created TensorFlow device
(/job:localhost/replica:0/task:0/device:GPU:0 with 7524 MB memory)`; its MB are MiB, 7524 MB the 7889485824 bytes it
then asks the driver for)."""

_DRIVER_REFUSED = re.compile(r"(?:cuda|rocm)_driver\.cc:\d+\] failed to allocate [\d.]{1,12}\s*[KMGT]?i?B?\s*"
                             r"\((\d{1,15}) bytes\)")
"""The driver refusing an allocation (`rocm_driver.cc:601] failed to allocate 7.35G (7889485824 bytes) from device:
hipError_t(1002)`), with its exact size."""


def tf_pool(line: str) -> int | None:
    """Bytes of the pool TensorFlow's device report at start gives, or None."""
    found = _TF_POOL.search(line) if "TensorFlow device" in line else None
    return int(found.group(1)) * MIB if found else None


def pool_refused(text: str, pool: int) -> bool:
    """Whether the driver refused the pool itself (the first allocation of a preallocating TensorFlow, its size to
    within a tenth): TensorFlow had just read that much free, so between that reading and the allocation something
    outside the program took it. A later, smaller allocation refused is the program's own growth (allow_growth)."""
    found = _DRIVER_REFUSED.search(text)
    return found is not None and abs(int(found.group(1)) - pool) * 10 <= pool


def pool_note(pool: int) -> str:
    """Why the memory is another's, for the advice (`... held the card` follows it)."""
    return f"the driver refused the {gib(pool)} pool TensorFlow sized from the memory the card reported free at start"
