"""Every third-party package that loratui imports is declared in pyproject.toml (issue 26 item 17).

psutil used to arrive only because accelerate needs it: a user whose accelerate stopped needing it would have
got an ImportError from the supervisor. Each import in the package (inside functions too) is mapped to the
distribution that provides it, and that distribution must be a dependency or an optional extra.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        specs += extra
    return {_normal(re.split(r"[\s<>=!~\[;]", spec, maxsplit=1)[0]) for spec in specs}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _imported_top_levels() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in (ROOT / "loratui").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    return found


def test_every_third_party_import_is_declared() -> None:
    providers = importlib.metadata.packages_distributions()
    declared = _declared()
    missing = []
    for top, where in sorted(_imported_top_levels().items()):
        if top in sys.stdlib_module_names or top == "loratui" or top not in providers:
            continue  # the standard library, ourselves, or a module only importable on a GPU box (guarded)
        if not {_normal(dist) for dist in providers[top]} & declared:
            missing.append(f"{top} ({where}): provided by {providers[top]}")
    assert missing == [], "imported but not declared in pyproject.toml: " + "; ".join(missing)
