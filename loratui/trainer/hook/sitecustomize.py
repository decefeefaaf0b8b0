"""loratui's startup hook for a watched command (`loratui run -- COMMAND`).

The supervisor puts this directory first on that command's PYTHONPATH only (and every process it starts
inherits it: torchrun and accelerate ranks, LLaMA-Factory's and axolotl's launchers). At interpreter start
Python imports this `sitecustomize`, which installs a finder that waits for `transformers.trainer`
(../autohook.py, run from its file: no loratui module and no module of the standard library the script would not
have loaded shows in sys.modules), then takes itself out of the way: this directory leaves `sys.path`, the
`sitecustomize` it shadows (a distribution's, a virtualenv's, the user's own) runs as Python would have run
it, its `sys.path` changes kept, and `sys.modules["sitecustomize"]` ends as it would be without loratui.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _activate() -> None:
    """Run ../autohook.py from its file, under no name in sys.modules (a plain script sees no loratui module;
    loratui's load only when transformers.trainer does), and install its finder."""
    if not os.environ.get("LORATUI_RUN_DIR"):
        return
    path = os.path.join(os.path.dirname(_HERE), "autohook.py")
    autohook = type(sys)("loratui.trainer.autohook")
    autohook.__file__ = path
    try:
        with open(path, encoding="utf-8") as source:
            exec(compile(source.read(), path, "exec"), autohook.__dict__)  # noqa: S102 - loratui's own file
    except (OSError, SyntaxError) as exc:
        print(f"loratui: cannot hook this process's Trainer ({exc}); its output is still watched", file=sys.stderr)
        return
    autohook.install()


def _leave_path() -> None:
    """Take this directory off sys.path: the script sees the path it would see without loratui."""
    for index, entry in enumerate(sys.path):
        if os.path.abspath(entry or ".") == _HERE:
            del sys.path[index]
            return


def _chain() -> bool:
    """Run the sitecustomize this one shadows as Python would have (True when there is one). Its module
    replaces this one in sys.modules, and what it does to sys.path stays."""
    ours = sys.modules.pop("sitecustomize", None)
    try:
        if not any(getattr(f, "find_spec", None) and f.find_spec("sitecustomize", None) for f in sys.meta_path):
            if ours is not None:
                sys.modules["sitecustomize"] = ours  # for the import of this module to finish
            return False
        __import__("sitecustomize")  # importlib.util would be a module the script did not load
    except Exception as exc:  # theirs failed: say so, as Python itself would, and go on
        print(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{type(exc).__name__}: {exc}",
              file=sys.stderr)
        sys.modules.pop("sitecustomize", None)
        if ours is not None:
            sys.modules["sitecustomize"] = ours
        return False
    return True


_KEEPER = os.environ.get("LORATUI_KEEPER") == "1"  # loratui's keeper of the command: hook nothing, run nothing
if not _KEEPER:
    _activate()
_leave_path()
if _KEEPER or not _chain():
    # No sitecustomize of theirs: Python's site module reads an ImportError naming "sitecustomize" as
    # "there is none" and says nothing, and the import system drops this module from sys.modules. The
    # finder installed above stays.
    raise ImportError("no sitecustomize besides loratui's hook", name="sitecustomize")
