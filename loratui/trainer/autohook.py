"""The light half of the startup hook: waits for the script to import `transformers.trainer`.

Imported at interpreter start by trainer/hook/sitecustomize.py in a watched command, so it imports
nothing heavy: one meta-path finder, which does nothing until `transformers.trainer` is imported. Then
that module runs as its own loader would run it, and `loratui.trainer.watch.patch` patches its Trainer.
"""

from __future__ import annotations

import importlib.abc
import sys
from typing import Any

TRAINER_MODULE = "transformers.trainer"


class _PatchingLoader(importlib.abc.Loader):
    """Runs transformers.trainer with its own loader, then patches its Trainer."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.inner.exec_module(module)
        from loratui.trainer.watch import patch

        patch(module.Trainer)

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename...: tracebacks still read the file
        return getattr(self.inner, name)


class PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: asks the other finders for transformers.trainer and wraps its loader."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != TRAINER_MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PatchingLoader(spec.loader)
                _remove(self)  # its one job is done: sys.meta_path is the script's own again
                return spec
        return None


def _remove(finder: PostImportFinder) -> None:
    try:
        sys.meta_path.remove(finder)
    except ValueError:
        pass


def install() -> None:
    """Patch Trainer when transformers.trainer loads (at once, if it already has)."""
    module = sys.modules.get(TRAINER_MODULE)
    if module is not None and hasattr(module, "Trainer"):
        from loratui.trainer.watch import patch

        patch(module.Trainer)
        return
    if not any(isinstance(finder, PostImportFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, PostImportFinder())
