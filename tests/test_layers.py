"""The layers of ARCHITECTURE.md, checked on the source: read → compute →
render → write, each layer importing only the layers before it (at the top
of a module or inside a function alike), and no two modules importing each
other round a circle (type-only imports aside: they run in no program)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "attncli"

# Each layer and the layers it may import besides itself (errors.py and text.py are everyone's).
ALLOWED = {
    "core": set(),
    "readers": set(),
    "vectors": {"readers"},
    "models": {"core", "readers"},
    "output": set(),
    "cli": {"core", "readers", "vectors", "models", "output", "attncli"},
}
SHARED = {"errors", "text"}


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(path): path for path in PACKAGE.rglob("*.py")}


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(module imported, whether only for type checking) for every attncli import in the file."""
    tree = ast.parse(path.read_text())
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        for stmt in node.body
        for inner in ast.walk(stmt)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("attncli"):
            named = [f"{node.module}.{alias.name}" for alias in node.names]
            found += [(name, id(node) in typing_only) for name in named if name in MODULES] or [
                (node.module, id(node) in typing_only)
            ]
        elif isinstance(node, ast.Import):
            found += [(alias.name, id(node) in typing_only) for alias in node.names if alias.name.startswith("attncli")]
    return found


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "attncli"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer(m) in ALLOWED))
def test_a_layer_imports_only_the_layers_before_it(module):
    layer = _layer(module)
    upward = [
        target for target, _ in _imports(MODULES[module]) if _layer(target) not in {layer, *ALLOWED[layer], *SHARED}
    ]
    assert not upward, f"{module} imports {upward}, which {layer}/ may not (ARCHITECTURE.md)"


def test_no_import_circles():
    graph = {
        module: {target for target, typing_only in _imports(path) if not typing_only and target in MODULES}
        for module, path in MODULES.items()
    }
    circles = []
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []

    def strong(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in graph:
        if module not in index:
            strong(module)
    assert circles == []
