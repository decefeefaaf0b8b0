"""Issue 26 item 18: no two modules of loratui/supervisor import each other (config_fix and restart did),
counting imports inside functions: a lazy import is still a dependency."""

from __future__ import annotations

from pathlib import Path

from tests.test_import_rules import PACKAGE, imported, module_name


def _graph(package: str) -> dict[str, set[str]]:
    """Each module of `package` and the modules of `package` it imports."""
    modules = {module_name(p): p for p in (PACKAGE / package).rglob("*.py")}
    return {name: {m for m in imported(path) if m in modules and m != name} for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle, found once from its smallest module."""
    found = []
    for start in sorted(graph):
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    found.append(path)
                elif nxt > start and nxt not in path:
                    stack.append((nxt, path + [nxt]))
    return found


def test_the_supervisor_has_no_import_cycle() -> None:
    assert _cycles(_graph("supervisor")) == []


def test_the_cycle_finder_finds_one(tmp_path: Path) -> None:
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
