"""bitsandbytes' CUDA setup read from its own output and from the stack, beyond the lines that say "failed":
its warning that the CUDA runtime is not on the library paths, standing until the setup says it loaded a CUDA
binary (a healthy Colab import warns the same and then loads `libbitsandbytes_cuda118.so`); and an exception
raised inside bitsandbytes' setup code (`cuda_setup/`, `cextension.py`), whatever its message (`argument of
type 'WindowsPath' is not iterable` on Windows). Pure: lines and tracebacks in, facts out, bounded state."""

from __future__ import annotations

import re
from dataclasses import dataclass

from loratui.logic.advisor.advice import ERROR, WARNING, Advice, Finding
from loratui.logic.advisor.raised_where import raised_inside, users_file
from loratui.logic.fmt import quoted
from loratui.logic.tracebacks import Raised

_RUNTIME_MISSING = re.compile(
    r"libcudart\.so not found in any environmental path|No libcudart\.so found|"
    r"did not contain \[?'libcudart\.so'.{0,80}as expected", re.I)
"""bitsandbytes (0.35-0.41) warning that the CUDA runtime is not where it looks first."""
_LOADED = re.compile(r"CUDA SETUP: Loading binary \S*libbitsandbytes_(?!cpu)\w+\.(?:so|dll)", re.I)
"""Its setup then loaded a CUDA binary: the warning was only on the way there."""
_SETUP_LINE = re.compile(r"\s*CUDA[ _]SETUP:", re.I)
_CPU_PICKED = re.compile(r"libbitsandbytes_cpu\.(?:so|dll)|Defaulting to libbitsandbytes_cpu", re.I)
_SETUP_FILE = re.compile(r"bitsandbytes/(?:cuda_setup/|cextension\.py|diagnostics/|backends/\w+/__init__|"
                         r"__init__\.py)")
"""bitsandbytes' own setup code: an exception raised there is its setup failing, not the user's model."""


@dataclass
class BnbSetup:
    """The CUDA runtime warning, standing until a CUDA binary is loaded after it."""

    warned: str = ""  # the warning line
    went_on: bool = False  # the setup printed more after it (its outcome was due)
    loaded: bool = False  # a CUDA binary was loaded after it
    step: int = 0

    def line(self, line: str, step: int) -> None:
        if "libcudart" in line and not self.warned and _RUNTIME_MISSING.search(line):
            self.warned, self.loaded, self.step = quoted(line), False, step
        elif self.warned and "libbitsandbytes" in line and not _CPU_PICKED.search(line) and \
                _LOADED.search(line):
            self.loaded = True
        elif self.warned and _SETUP_LINE.match(line):
            self.went_on = True

    def finding(self) -> Finding | None:
        """The warning as a finding when the setup went on past it and never said it loaded a CUDA binary (the
        warning alone says nothing of the outcome: a healthy import prints it too, then loads one)."""
        if not self.warned or not self.went_on or self.loaded:
            return None
        return Finding("bnb_setup", self.step, {"line": self.warned, "runtime": True})


_MISMATCH_TYPES = frozenset({"AttributeError", "NameError", "ImportError"})
_ARGUMENTS = re.compile(r"unexpected keyword argument|positional arguments? but|missing \d+ required|"
                        r"takes \d+ positional", re.I)
"""A call that does not fit the function's signature: the caller was written for another version."""


def _elsewhere(path: str) -> bool:
    return "site-packages/" in path or "dist-packages/" in path or users_file(path)


def raised_in_setup(raised: Raised | None) -> bool:
    """Whether the exception was raised inside bitsandbytes' setup code (its innermost library frame), or inside
    any of its code with an error of a mismatch (an attribute, a name or an import missing, a signature that does
    not fit: `'Int8Params' object has no attribute 'SCB'`, `name 'lib' is not defined`): the installed bitsandbytes
    is not the one its callers were written for, or its library never loaded."""
    if raised is None or not raised.frames:
        return False
    if "No module named" in raised.message and "bitsandbytes" not in raised.message:
        return False  # a dependency it imports is missing: its own pip install is the step
    path = raised_inside(raised, lambda p: "bitsandbytes/" in p, _elsewhere)
    if path is None:
        return False
    return bool(_SETUP_FILE.search(path)) or raised.short_type in _MISMATCH_TYPES or \
        raised.short_type == "TypeError" and _ARGUMENTS.search(raised.message) is not None


def runtime_advice(f: Finding) -> Advice:
    """The CUDA runtime warning with no CUDA binary loaded after it."""
    return Advice("bnb_setup", WARNING, "bitsandbytes did not find the CUDA runtime (libcudart) on the library "
                  "paths and no CUDA binary load follows: pip install -U bitsandbytes (a build for torch's CUDA), "
                  "or add the CUDA lib folder to LD_LIBRARY_PATH",
                  [f.facts["line"], "python -m bitsandbytes prints where it looked and which binary it picked",
                   "a setup that works goes on to 'Loading binary ...libbitsandbytes_cudaXXX.so'"], {}, f.step)


def raised_advice(raised: Raised, step: int) -> Advice:
    """An exception raised by bitsandbytes' own setup code."""
    where = next((f.path for f in reversed(raised.frames) if "bitsandbytes" in f.path), "")
    what = "bitsandbytes' setup failed" if _SETUP_FILE.search(where.replace("\\", "/")) else \
        "bitsandbytes failed inside its own code, a sign of a version its callers were not written for"
    return Advice("bnb_setup", ERROR, f"{what} ({raised.short_type}: {raised.message[:120]}): "
                  "pip install -U bitsandbytes (a build for this OS and torch's CUDA)",
                  [raised.line, f"raised in {where}" if where else "raised in bitsandbytes",
                   "python -m bitsandbytes prints why it cannot set up CUDA"], {}, step)
