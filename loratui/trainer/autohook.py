"""The light half of the startup hook: waits for the script to import `transformers.trainer`.

Run at interpreter start by trainer/hook/sitecustomize.py in a watched command, from its file and under no name
in `sys.modules`: a plain script must see the modules it would see alone (no `loratui.*`), so this imports
nothing (`sys` and `os` are loaded before any sitecustomize) and has no `from __future__` (that import is real).
One meta-path finder does nothing until `transformers.trainer` is imported; then that module runs as its own
loader would run it, and when the first Trainer is built `loratui.trainer.watch.patch` patches the class
(loratui's modules load only then).
"""

import os
import sys

TRAINER_MODULE = "transformers.trainer"
ROOT_ENV = "LORATUI_HOOK_ROOT"
"""The directory holding the loratui package, for an interpreter that has no loratui of its own."""


def _patch(trainer: "type") -> None:
    """Patch the Trainer class when the first Trainer is built: a process that imports transformers.trainer and
    builds none (a "spawn" DataLoader worker re-importing the script, a script importing it for its types) loads
    no loratui module. Subclasses reach this __init__ through super() or by inheriting it."""
    original = trainer.__init__
    if getattr(original, "_loratui_deferred", False) or getattr(trainer, "_loratui_patched", False):
        return
    target = []  # what this __init__ calls once loratui has been asked: its patched one, or the original

    def __init__(self: "object", *args: "object", **kwargs: "object") -> None:
        if not target:
            current = trainer.__dict__.get("__init__")
            trainer.__init__ = original
            _load_and_patch(trainer)
            target.append(trainer.__init__)
            if current is not __init__:  # a library wrapped it after the import, calling this as its original
                trainer.__init__ = current
        target[0](self, *args, **kwargs)

    for name in ("__module__", "__name__", "__qualname__", "__doc__"):
        setattr(__init__, name, getattr(original, name, getattr(__init__, name)))
    __init__.__wrapped__ = original  # inspect.signature(Trainer.__init__) reads the original's
    __init__._loratui_deferred = True
    trainer.__init__ = __init__


def _load_and_patch(trainer: "type") -> None:
    """Patch the Trainer class; loratui comes from the end of the path where this interpreter has none of its own
    (its packages win). Where loratui cannot be loaded, the process is left as it was (its path, no loratui
    module), the Trainer is built unhooked, and one line says why and what to do."""
    before = set(sys.modules)
    root = os.environ.get(ROOT_ENV, "")
    added = False
    try:
        try:
            from loratui.trainer.watch import patch
        except ImportError:
            added = bool(root) and root not in sys.path
            if added:
                sys.path.append(root)
            from loratui.trainer.watch import patch
    except Exception as exc:  # noqa: BLE001 - not only ImportError: syntax or APIs this Python lacks
        if added and root in sys.path:
            sys.path.remove(root)
        for name in set(sys.modules) - before:
            if name == "loratui" or name.startswith("loratui."):  # a half-imported loratui, not the script's
                del sys.modules[name]
        print(f"loratui: this process's Trainer is not hooked: {sys.executable} cannot import loratui "
              f"({type(exc).__name__}: {exc}); its output is still watched. To record its steps, install loratui "
              "in this Python's environment or run the script with loratui's own Python.", file=sys.stderr)
        return
    patch(trainer)


class _PatchingLoader:
    """Runs transformers.trainer with its own loader, then patches its Trainer (a loader needs no base class)."""

    def __init__(self, inner: "object", finder: "PostImportFinder") -> None:
        self.inner = inner
        self.finder = finder

    def create_module(self, spec: "object") -> "object":
        return self.inner.create_module(spec)

    def exec_module(self, module: "object") -> None:
        self.inner.exec_module(module)
        _remove(self.finder)  # its one job is done: sys.meta_path is the script's own again
        _patch(module.Trainer)

    def __getattr__(self, name: str) -> "object":  # get_source, get_filename...: tracebacks still read the file
        return getattr(self.inner, name)


class PostImportFinder:
    """Finds nothing itself: asks the other finders for transformers.trainer and wraps its loader. It stays on
    sys.meta_path until that loader has run: a spec asked for and not loaded (importlib.util.find_spec, "is the
    Trainer there?") is not the one the import then loads."""

    def find_spec(self, name: str, path: "object", target: "object" = None) -> "object":
        if name != TRAINER_MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PatchingLoader(spec.loader, self)
                else:
                    _remove(self)  # a loader it cannot wrap: nothing more it can do
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
        _patch(module.Trainer)
        return
    if not any(type(finder).__name__ == "PostImportFinder" for finder in sys.meta_path):
        sys.meta_path.insert(0, PostImportFinder())
