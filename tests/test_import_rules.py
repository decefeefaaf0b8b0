"""Which package may import which (docs/ARCHITECTURE.md, "Import rules"), checked on the source itself.

Every `import` statement counts, including those inside functions: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "loratui"
CORE = {"loratui", "loratui.events", "loratui.eventlog", "loratui.rundir", "loratui.recipe", "loratui.errors",
        "loratui.units", "loratui.text", "loratui.runstatus", "loratui.outputtail", "loratui.bounds",
        "loratui.slurm", "loratui.nodelogs"}
"""The shared core: the run directory's contract, the recipe, errors, units, text hygiene."""

FORBIDDEN = {
    # the group -> the packages it must never import
    "loratui.logic": ("loratui.supervisor", "loratui.trainer", "loratui.tui", "loratui.sources",
                      "loratui.commands", "loratui.cli", "loratui.eventlog", "loratui.rundir"),
    "loratui.trainer": ("loratui.supervisor", "loratui.tui", "loratui.sources", "loratui.commands",
                        "loratui.cli"),
    "loratui.tui": ("loratui.supervisor", "loratui.trainer", "loratui.commands", "loratui.cli"),
    "loratui.sources": ("loratui.supervisor", "loratui.trainer", "loratui.tui", "loratui.commands",
                        "loratui.cli"),
    "loratui.supervisor": ("loratui.tui", "loratui.trainer", "loratui.sources", "loratui.commands",
                           "loratui.cli"),
    "loratui.commands": ("loratui.cli",),
    "core": ("loratui.logic", "loratui.supervisor", "loratui.trainer", "loratui.tui", "loratui.sources",
             "loratui.commands", "loratui.cli"),
}

EXCEPTIONS = {
    # `loratui.LoratuiCallback`, the explicit form of the watched-command hook, is a lazy attribute of the
    # package (a module __getattr__): `import loratui` loads no trainer code until a script asks for it.
    ("loratui", "loratui.trainer.watch"), ("loratui", "loratui.trainer.watch.LoratuiCallback"),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> set[str]:
    """Every loratui module `path` imports (`from loratui import x` counts as loratui.x)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name == "loratui" or name.startswith("loratui.")}


def group_of(module: str) -> str:
    if module in CORE:
        return "core"
    for group in FORBIDDEN:
        if module == group or module.startswith(group + "."):
            return group
    return "other"


def violations(modules: dict[str, set[str]]) -> list[str]:
    bad = []
    for module, names in sorted(modules.items()):
        banned = FORBIDDEN.get(group_of(module), ())
        for name in sorted(names):
            if (module, name) in EXCEPTIONS:
                continue
            if any(name == b or name.startswith(b + ".") for b in banned):
                bad.append(f"{module} imports {name}")
    return bad


def test_every_module_keeps_the_import_rules() -> None:
    modules = {module_name(p): imported(p) for p in PACKAGE.rglob("*.py")}
    assert "loratui.supervisor.owner" in modules and "loratui.trainer.callback" in modules
    assert violations(modules) == []


@pytest.mark.parametrize(("module", "name"), [
    ("loratui.trainer.callback", "loratui.supervisor.owner"),
    ("loratui.tui.app", "loratui.supervisor.restart"),
    ("loratui.tui.app", "loratui.supervisor"),
    ("loratui.logic.advisor", "loratui.tui.app"),
    ("loratui.rundir", "loratui.supervisor.control"),
    ("loratui", "loratui.trainer.callback"),
])
def test_a_forbidden_import_is_caught(module: str, name: str) -> None:
    assert violations({module: {name}}) == [f"{module} imports {name}"]
