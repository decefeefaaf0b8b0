"""loratui's startup hook for a watched command (`loratui run -- COMMAND`).

The supervisor puts this directory first on that command's PYTHONPATH only (and every process it starts
inherits it: torchrun and accelerate ranks, LLaMA-Factory's and axolotl's launchers). At interpreter start
Python imports this `sitecustomize`, which installs a finder that waits for `transformers.trainer`
(importing nothing heavy), then runs the `sitecustomize` it shadows, if there is one.
"""

import os
import sys


def _activate() -> None:
    if not os.environ.get("LORATUI_RUN_DIR"):
        return
    try:
        from loratui.trainer import autohook
    except ImportError:
        # Another interpreter than loratui's: reach loratui from the end of the path (its packages win).
        root = os.environ.get("LORATUI_HOOK_ROOT", "")
        if root and root not in sys.path:
            sys.path.append(root)
        try:
            from loratui.trainer import autohook
        except ImportError as exc:
            print(f"loratui: cannot hook this process's Trainer ({exc}); its output is still watched",
                  file=sys.stderr)
            return
    autohook.install()


def _chain() -> None:
    """Run the sitecustomize this one shadows (a distribution's or a virtualenv's), as Python would have."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    ours = sys.modules.pop("sitecustomize", None)
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        if importlib.util.find_spec("sitecustomize") is not None:
            importlib.import_module("sitecustomize")
    except Exception as exc:  # theirs failed: say so, as Python itself would, and go on
        print(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{type(exc).__name__}: {exc}",
              file=sys.stderr)
    finally:
        sys.path[:] = saved
        if ours is not None:
            sys.modules["sitecustomize"] = ours


_activate()
_chain()
