"""The layout: the import graph of src/clirace, read from the code (ast), has no import cycle, no import from a
lower layer to a higher one, and a root of at most 12 entries (README, Layout)."""
from __future__ import annotations

import ast
import functools
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "clirace"

# Lowest first: a module may import from its own layer and the layers below it, never from one above.
LAYERS: list[set[str]] = [
    {"clirace.errors"},
    {"clirace.history"},
    {"clirace.spec"},
    {"clirace.run"},
    {"clirace.checks"},
    {"clirace.verdict"},
    {"clirace.scenarios"},
    {"clirace.report"},
    {"clirace.cli", "clirace.pytest_plugin", "clirace", "clirace.__main__"},
]
MAX_ROOT_ENTRIES = 12


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts}


def imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The clirace modules that `name` imports (at the top or inside a function): `from a.b import c` counts as
    an import of a.b.c when that is a module, else of a.b."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                head = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(head + ([node.module] if node.module else []))
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {m for m in found if m in known and m != name}


@functools.cache  # read once for the two tests that check it (~1 s of CPU each; tests/conftest.py keeps them together)
def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(path, name, set(found)) for name, path in found.items()}


def layer_of(module: str) -> int:
    best, level = -1, -1
    for index, layer in enumerate(LAYERS):
        for prefix in layer:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, level = len(prefix), index
    assert level >= 0, f"{module} is on no layer: add its folder to LAYERS"
    return level


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(edges.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles():
    assert cycles(graph()) == []


def test_cycles_are_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_imports_only_go_down():
    upward = sorted(f"{module} (layer {layer_of(module)}) imports {target} (layer {layer_of(target)})"
                    for module, targets in graph().items() for target in targets
                    if layer_of(target) > layer_of(module))
    assert upward == []


def test_the_root_is_small():
    entries = sorted(p.name for p in SRC.iterdir() if p.name != "__pycache__")
    assert len(entries) <= MAX_ROOT_ENTRIES, entries
