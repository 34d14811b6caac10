"""The package's shape, read from its code: module sizes, import cycles and layers.

Every module of torchrepro_lint is parsed with `ast`. Its imports are all of them, those inside
functions included (they run too, only later), except those under `if TYPE_CHECKING:`, which
never run. A relative import is resolved against the module's package, and `from pkg import
name` imports the module `pkg.name` where there is one, else `pkg` itself.

The layers, from the ground up (a module may import its own layer and any layer below):

    torchrepro_lint (version, URLs), config, findings, catalog, memory   what everything shares
    parsing       a file read, decoded and parsed; positions; parsing an edit again
    notebooks     a notebook read as one module, findings mapped back to cells
    analysis      one module's syntax: names, data flow, op matching
    project       the program model: project index, IR, interpreter
    rules         the rules, each on one module or one program
    pipeline      one run: discovery, the stages, the cache, processes
    fixes         writing fixes and noqa comments back;  reporters: output formats
    integrations  flake8 and the project cache others share
    server        the language server
    cli           the command line; __main__ runs it
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

import torchrepro_lint

PACKAGE = "torchrepro_lint"
ROOT = Path(torchrepro_lint.__file__).resolve().parent
MAX_LINES = 600

# Lowest first; the layers of one tier do not import each other.
TIERS = [
    {PACKAGE, "config", "findings", "catalog", "memory"},
    {"parsing"},
    {"notebooks"},
    {"analysis"},
    {"project"},
    {"rules"},
    {"pipeline"},
    {"fixes", "reporters"},
    {"integrations"},
    {"server"},
    {"cli"},
    {"__main__"},
]
# layer -> the layers it may import besides its own
ALLOWED_BELOW = {layer: set().union(*TIERS[:level]) for level, tier in enumerate(TIERS) for layer in tier}
# The entry point that runs the command line: the one module allowed to import it.
CLI = f"{PACKAGE}.cli"
RUNS_THE_CLI = {f"{PACKAGE}.__main__"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@lru_cache(maxsize=1)
def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_statements(tree: ast.AST):
    """Every import statement, at any depth, but for the body of `if TYPE_CHECKING:`."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.If) and _type_checking(child.test):
            for statement in child.orelse:
                yield from _import_statements(ast.Module(body=[statement], type_ignores=[]))
            continue
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        yield from _import_statements(child)


def _existing_module(dotted: str) -> str:
    """The module `dotted` names, or the nearest package above it that exists."""
    known = modules()
    while dotted not in known and "." in dotted:
        dotted = dotted.rpartition(".")[0]
    return dotted


def _imported(importer: str, statement: ast.Import | ast.ImportFrom) -> list[str]:
    """The package's modules an import statement of `importer` imports."""
    if isinstance(statement, ast.Import):
        return [_existing_module(alias.name) for alias in statement.names if alias.name.split(".")[0] == PACKAGE]
    if statement.level:
        is_package = modules()[importer].name == "__init__.py"
        base = importer if is_package else importer.rpartition(".")[0]
        for _ in range(statement.level - 1):
            base = base.rpartition(".")[0]
        source = f"{base}.{statement.module}" if statement.module else base
    else:
        source = statement.module or ""
    if source.split(".")[0] != PACKAGE:
        return []
    # `from pkg import name`: the module pkg.name where there is one, else pkg itself
    return [_existing_module(f"{source}.{alias.name}") if f"{source}.{alias.name}" in modules() else _existing_module(source)
            for alias in statement.names]


@lru_cache(maxsize=1)
def imports() -> dict[str, dict[str, int]]:
    """importer -> {imported module: line of the first statement importing it}."""
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules().items():
        edges = graph.setdefault(name, {})
        for statement in _import_statements(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for target in _imported(name, statement):
                if target != name:
                    edges.setdefault(target, statement.lineno)
    return graph


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else PACKAGE


def _where(importer: str, imported: str) -> str:
    path = modules()[importer].relative_to(ROOT.parent)
    return f"{path}:{imports()[importer][imported]} imports {imported}"


def find_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle (its modules in import order) for each group of modules that import each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_cycle_through(group, graph) for group in groups]


def _cycle_through(group: list[str], graph: dict[str, dict[str, int]]) -> list[str]:
    """The shortest way from the group's first module back to itself, inside the group."""
    start, members = group[0], set(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph.get(node, ())):
                if target not in members or target in came_from:
                    continue
                came_from[target] = node
                if target == start:
                    path = [start]
                    while path[-1] != start or len(path) == 1:
                        path.append(came_from[path[-1]])
                    return list(reversed(path))
                following.append(target)
        frontier = following
    return group


def test_no_module_is_over_600_lines():
    too_long = [
        f"{path.relative_to(ROOT.parent)}: {lines} lines"
        for path in modules().values()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    ]
    assert not too_long, f"modules over {MAX_LINES} lines (split them along a seam):\n" + "\n".join(too_long)


def test_no_import_cycle():
    graph = imports()
    cycles = find_cycles(graph)
    described = [
        "\n".join(f"  {_where(a, b)}" for a, b in zip(cycle, cycle[1:])) for cycle in cycles
    ]
    assert not cycles, "modules that import each other (move what they share to the lower one):\n" + "\n\n".join(described)


def test_every_module_has_a_layer():
    unplaced = sorted({layer_of(module) for module in modules()} - set(ALLOWED_BELOW))
    assert not unplaced, f"packages or modules in no layer (add them to TIERS): {unplaced}"


def test_imports_follow_the_layers():
    wrong = []
    for importer, targets in sorted(imports().items()):
        low = layer_of(importer)
        for target in sorted(targets):
            high = layer_of(target)
            if high != low and high in ALLOWED_BELOW and low in ALLOWED_BELOW and high not in ALLOWED_BELOW[low]:
                wrong.append(f"  {_where(importer, target)}: {low} may not import {high}")
    assert not wrong, "imports against the layers (see this file's docstring):\n" + "\n".join(wrong)


def test_nothing_imports_the_cli():
    importers = [
        f"  {_where(importer, CLI)}"
        for importer, targets in sorted(imports().items())
        if CLI in targets and importer not in RUNS_THE_CLI
    ]
    assert not importers, "the command line is the top: nothing below may import it:\n" + "\n".join(importers)


def test_the_checks_see_cycles_and_nested_imports(tmp_path):
    """The graph reads imports inside functions and skips TYPE_CHECKING ones; cycles are found."""
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from torchrepro_lint.cli import main\n"
        "def f():\n    from torchrepro_lint.findings import Finding\n"
    )
    found = [target for statement in _import_statements(tree) for target in _imported(f"{PACKAGE}.config", statement)]
    assert found == [f"{PACKAGE}.findings"]
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1, "d": 1}, "d": {}}
    assert find_cycles(graph) == [["a", "b", "c", "a"]]
