"""The packages read top-down (docs/architecture.md): the command line (`cli/`) is the top layer and alone wires actors, events, memory and devices
together; the core (the rest of `accelopt/`: config, problem, records, the event catalog,
the coordinator) imports no other package of the project; nothing imports the command line;
no two packages import each other, and no modules import each other in a circle. Checked
on the source's import statements (including the lazy ones inside functions)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("cli", "accelopt", "actors", "events", "memory_index", "hardware_agents", "prompts", "replay", "suites")


def _layer_of_module(module: str) -> str | None:
    top = module.split(".")[0]
    if top not in PACKAGES:
        return None
    return top


def _layer_of_file(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    return _layer_of_module(".".join(p for p in rel.parts if p != "__init__")) or rel.parts[0]


def _imports() -> dict[tuple[str, str], list[str]]:
    """(importing layer, imported layer) -> 'file -> module' lines."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            src = _layer_of_file(path)
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    modules = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                else:
                    continue
                for module in modules:
                    dst = _layer_of_module(module)
                    if dst is not None and dst != src:
                        edges[(src, dst)].append(f"{path.relative_to(ROOT)} -> {module}")
    return edges


EDGES = _imports()


def _module_of(path: Path) -> str:
    return ".".join(p for p in path.relative_to(ROOT).with_suffix("").parts if p != "__init__")


def _is_module(name: str) -> bool:
    rel = ROOT / name.replace(".", "/")
    return rel.with_suffix(".py").is_file() or (rel / "__init__.py").is_file()


def _module_graph() -> dict[str, set[str]]:
    """Module -> the project's modules it imports (lazily inside functions, and for type
    checkers only in a `TYPE_CHECKING` block, too: a module that needs another's types to
    call it is as tied to it; `from pkg import sub` imports the submodule `pkg.sub`)."""
    graph: dict[str, set[str]] = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            tree = ast.parse(path.read_text(), str(path))
            deps: set[str] = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    deps.update(a.name for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    subs = [f"{node.module}.{a.name}" for a in node.names]
                    deps.update(subs if all(_is_module(m) for m in subs) else [node.module])
            graph[_module_of(path)] = {d for d in deps if _is_module(d)}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_core_imports_no_other_package():
    leaks = [line for (src, _), lines in EDGES.items() if src == "accelopt" for line in lines]
    assert not leaks, leaks


def test_nothing_imports_the_command_line():
    callers = [line for (src, dst), lines in EDGES.items() if dst == "cli" for line in lines]
    assert not callers, callers


def test_no_two_packages_import_each_other():
    pairs = [(a, b, EDGES[(a, b)][0], EDGES[(b, a)][0]) for (a, b) in EDGES if (b, a) in EDGES and a < b]
    assert not pairs, pairs


def test_no_modules_import_each_other_in_a_circle():
    assert not _cycles(_module_graph())


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_read_side_does_not_reach_into_the_actors():
    assert ("replay", "actors") not in EDGES, EDGES[("replay", "actors")]
    assert ("events", "actors") not in EDGES, EDGES[("events", "actors")]


def test_the_checker_sees_the_layers_it_checks():
    """Guards the checks above against passing on an empty or misparsed graph."""
    assert EDGES[("cli", "actors")] and EDGES[("actors", "accelopt")] and EDGES[("events", "accelopt")]
