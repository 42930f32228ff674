"""The project's folders read top-down (docs/architecture.md). `LAYERS` is their order: a
folder imports only folders of the layers below its own, never one of its own layer or one
above (0 upward imports). So the command line (`cli/`) is the top and nothing imports it;
the actors come next and only the command line reaches into them; the core (`accelopt/`:
config, problem, records, the event catalog, the coordinator core) is the bottom and imports
no other folder. Inside `actors/` its groups are layered the same way (`ACTOR_GROUPS`), and
no modules import each other in a circle. Checked on the source's import statements: lazy
ones inside functions, `TYPE_CHECKING` ones and relative ones included."""

from __future__ import annotations

import ast
import functools
import re
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# top-down; a folder may import only folders of later layers
LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli",),  # the `accelopt` command: wires everything below together
    ("actors",),  # what runs while a run runs: hosting, roles, the LLM plumbing
    ("replay", "prompts", "suites"),  # the read side; prompt rendering; problem suites
    ("memory_index",),  # the optimization memory (rebuilt from exported logs)
    ("events", "hardware_agents"),  # the log's transport; the device agents
    ("accelopt",),  # the core
)
# the groups of actors/, top-down, the same rule inside the folder
ACTOR_GROUPS: tuple[tuple[str, ...], ...] = (
    ("actors.runtime",),
    ("actors.roles",),
    ("actors.llm", "actors.base"),
)


def _installed_packages() -> list[str]:
    """The top-level packages pyproject installs (`[tool.setuptools.packages.find] include`)."""
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    return [name.rstrip("*") for name in find["include"]]


PACKAGES = _installed_packages()


def _module_of(path: Path) -> str:
    return ".".join(p for p in path.relative_to(ROOT).with_suffix("").parts if p != "__init__")


def _is_module(name: str) -> bool:
    rel = ROOT / name.replace(".", "/")
    return rel.with_suffix(".py").is_file() or (rel / "__init__.py").is_file()


def _imported(path: Path, tree: ast.AST) -> list[tuple[str, list[str]]]:
    """(module, names it may be a package of) per imported module: `import a.b` is
    ("a.b", []), `from pkg import x, y` is ("pkg", ["pkg.x", "pkg.y"]) (x may be a submodule);
    a relative import is resolved against `path`."""
    package = _module_of(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    out: list[tuple[str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((a.name, []) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            out.append((base, [f"{base}.{a.name}" for a in node.names]))
    return out


def _sources() -> list[tuple[Path, ast.AST]]:
    return [
        (path, ast.parse(path.read_text(), str(path)))
        for pkg in PACKAGES
        for path in (ROOT / pkg).rglob("*.py")
    ]


SOURCES = _sources()


def _edges(unit_of) -> dict[tuple[str, str], list[str]]:
    """(importing unit, imported unit) -> 'file -> module' lines; `unit_of(module)` names a
    module's unit (a folder, an actors group) or None for modules outside the check."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path, tree in SOURCES:
        src = unit_of(_module_of(path))
        if src is None:
            continue
        for base, subs in _imported(path, tree):
            for module in (base, *subs):
                dst = unit_of(module)
                if dst is not None and dst != src:
                    edges[(src, dst)].append(f"{path.relative_to(ROOT)} -> {module}")
    return edges


def _folder(module: str) -> str | None:
    top = module.split(".")[0]
    return top if top in PACKAGES else None


def _actor_group(module: str) -> str | None:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "actors" and len(parts) > 1 else None


FOLDER_EDGES = _edges(_folder)
GROUP_EDGES = _edges(_actor_group)


def _upward(edges: dict[tuple[str, str], list[str]], layers: tuple[tuple[str, ...], ...]) -> list[str]:
    """Imports of a unit of the same layer or of a layer above the importer's."""
    rank = {unit: i for i, layer in enumerate(layers) for unit in layer}
    return [line for (src, dst), lines in sorted(edges.items()) if rank[dst] <= rank[src] for line in lines]


def _module_graph() -> dict[str, set[str]]:
    """Module -> the project's modules it imports (lazily inside functions, and for type
    checkers only in a `TYPE_CHECKING` block, too: a module that needs another's types to
    call it is as tied to it; `from pkg import sub` imports the submodule `pkg.sub`)."""
    graph: dict[str, set[str]] = {}
    for path, tree in SOURCES:
        deps: set[str] = set()
        for base, subs in _imported(path, tree):
            deps.update(subs if subs and all(_is_module(m) for m in subs) else [base])
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


def test_every_installed_folder_has_one_layer():
    placed = [unit for layer in LAYERS for unit in layer]
    assert sorted(placed) == sorted(PACKAGES) and len(set(placed)) == len(placed), (placed, PACKAGES)
    groups = sorted(p.parent.name for p in (ROOT / "actors").glob("*/__init__.py"))
    assert sorted(g.split(".")[1] for layer in ACTOR_GROUPS for g in layer) == groups, groups
    assert not [p.name for p in (ROOT / "actors").glob("*.py") if p.name != "__init__.py"], (
        "a module of actors/ belongs in one of its groups"
    )


def test_no_folder_imports_its_own_layer_or_one_above():
    assert not _upward(FOLDER_EDGES, LAYERS)


def test_nothing_imports_the_command_line():
    callers = [line for (_, dst), lines in FOLDER_EDGES.items() if dst == "cli" for line in lines]
    assert not callers, callers


def test_no_actors_group_imports_its_own_layer_or_one_above():
    assert not _upward(GROUP_EDGES, ACTOR_GROUPS)


def test_actors_package_files_import_nothing():
    """`actors/__init__.py` and its groups' are docstrings: importing one group (the light
    `llm.pricing` in a run attached to a pool) must not load another (Ray, litellm)."""
    inits = [ROOT / "actors" / "__init__.py", *(ROOT / "actors").glob("*/__init__.py")]
    eager = [f"{p.relative_to(ROOT)}: {m}" for p in inits for m, _ in _imported(p, ast.parse(p.read_text()))]
    assert not eager, eager


def test_no_modules_import_each_other_in_a_circle():
    assert not _cycles(_module_graph())


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_order_check_finds_an_upward_and_a_sideways_import():
    layers = (("top",), ("mid_a", "mid_b"), ("core",))
    edges = {("top", "core"): ["down"], ("core", "mid_a"): ["up"], ("mid_a", "mid_b"): ["sideways"]}
    assert _upward(edges, layers) == ["up", "sideways"]


def test_the_checker_sees_the_layers_it_checks():
    """Guards the checks above against passing on an empty or misparsed graph."""
    assert FOLDER_EDGES[("cli", "actors")] and FOLDER_EDGES[("actors", "accelopt")]
    assert FOLDER_EDGES[("events", "accelopt")] and FOLDER_EDGES[("memory_index", "events")]
    assert GROUP_EDGES[("actors.runtime", "actors.roles")] and GROUP_EDGES[("actors.roles", "actors.base")]


# --- dispatch you can grep: explicit registries, one role table, one envelope builder ---------
# (outside hardware_agents/, whose sandbox children are started by a "module:function" target
# and whose agents register through their family's descriptor)

OUTSIDE_DEVICES = [(p, t) for p, t in SOURCES if p.relative_to(ROOT).parts[0] != "hardware_agents"]
IMPORT_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+:[A-Za-z_]\w*$")  # "pkg.module:Name"
LLM_ROLE_NAMES = {"planner", "executor", "fixer", "summarizer"}


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_nothing_is_looked_up_by_an_import_path_string():
    """Roles, commands and lazy names are imported by import statements a reader and a type
    checker follow, not by "pkg.module:Name" strings or a module name built at run time."""
    found = [
        f"{_rel(p)}:{n.lineno}: {n.value!r}"
        for p, t in OUTSIDE_DEVICES
        for n in ast.walk(t)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and IMPORT_PATH.match(n.value)
    ]
    assert not found, found
    dynamic = [
        f"{_rel(p)}:{n.lineno}"
        for p, t in OUTSIDE_DEVICES
        for n in ast.walk(t)
        if isinstance(n, ast.Attribute) and n.attr in ("import_module", "iter_modules", "__import__")
    ]
    assert not dynamic, dynamic


def test_the_import_path_check_finds_one():
    """Guards the check above: it sees a "module:Name" string and an import by name."""
    tree = ast.parse('F = "actors.roles.profiler:Profiler"\nimportlib.import_module(F.split(":")[0])')
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert [s for s in strings if IMPORT_PATH.match(s)] == ["actors.roles.profiler:Profiler"]
    assert [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "import_module"]


def _modules_of(package: Path) -> set[str]:
    return {
        p.stem if p.suffix == ".py" else p.name
        for p in package.iterdir()
        if not p.name.startswith("_") and (p.suffix == ".py" or (p / "__init__.py").is_file())
    }


def test_every_command_module_is_listed():
    """`cli/main.py` lists the commands, each group's package its subcommands: a module left
    out of its list would be a command nobody can run."""
    from cli import main
    from cli.commands import campaign, suite

    commands = ROOT / "cli" / "commands"
    assert {m.__name__.rpartition(".")[2] for m in main.COMMANDS} == _modules_of(commands)
    for group in (campaign, suite):
        listed = {m.__name__.rpartition(".")[2] for m in group.SUBCOMMANDS}
        assert listed == _modules_of(commands / group.__name__.rpartition(".")[2]), group.__name__


def _command_of(module: str) -> str | None:
    """The command a module of `cli/commands/` belongs to: its first name there (`run`,
    `campaign` for `cli.commands.campaign.status`); None for any other module."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["cli", "commands"] and len(parts) > 2 else None


def _cross_command_imports(sources: list[tuple[Path, ast.AST]]) -> list[str]:
    """Imports of a command's module from outside that command (`cli/main.py`, which lists
    them, aside)."""
    found = []
    for path, tree in sources:
        module = _module_of(path)
        if module.split(".")[0] != "cli" or module == "cli.main":
            continue
        own = _command_of(module)
        for base, subs in _imported(path, tree):
            for imported in (base, *subs):
                command = _command_of(imported)
                if command is not None and command != own:
                    found.append(f"{path.relative_to(ROOT)} -> {imported}")
    return sorted(set(found))


def test_commands_share_helpers_not_each_other():
    """What several commands share is a module of `cli/` itself (options, session, run_log,
    progress, ...), never a command's: no command imports another one, and the helpers import
    none (cli/commands/run.py was once the helper module of 14 commands)."""
    assert not _cross_command_imports(SOURCES)


def test_the_cross_command_check_finds_one():
    """Guards the check above: a helper and another command importing a command are found,
    a command's own package and `cli/main.py` are not."""
    tree = ast.parse("from cli.commands.run import execute\nfrom cli.commands.campaign import _drive")
    found = _cross_command_imports(
        [
            (ROOT / "cli" / "session.py", tree),
            (ROOT / "cli" / "commands" / "campaign" / "run.py", tree),
            (ROOT / "cli" / "main.py", tree),
        ]
    )
    assert found == [
        "cli/commands/campaign/run.py -> cli.commands.run",
        "cli/commands/campaign/run.py -> cli.commands.run.execute",
        "cli/session.py -> cli.commands.campaign",
        "cli/session.py -> cli.commands.campaign._drive",
        "cli/session.py -> cli.commands.run",
        "cli/session.py -> cli.commands.run.execute",
    ]


def test_every_hosted_role_is_in_the_one_table():
    """A host builds an actor by its role (`actors/runtime/hosting.py`: `ACTOR_ROLES`,
    `actor_class`); the LLM roles among them are the catalog's (`LLM_ROLE_TABLE`), each
    served by the worker that declares it and answers its request."""
    from accelopt import catalog as ev
    from actors.base.worker import Worker
    from actors.roles.llm_roles import ROLE_WORKERS
    from actors.runtime.hosting import ACTOR_ROLES, actor_class

    assert set(ev.LLM_ROLES) <= set(ACTOR_ROLES) and len(set(ACTOR_ROLES)) == len(ACTOR_ROLES)
    assert list(ROLE_WORKERS) == list(ev.LLM_ROLES)
    for row in ev.LLM_ROLE_TABLE:
        worker = actor_class(row.name)
        assert worker is ROLE_WORKERS[row.name] and worker.role == row.name
    hosted = {actor_class(r) for r in ACTOR_ROLES}
    # every worker class of actors/roles/ is hosted under some role
    workers = {
        c for c in _subclasses(Worker) if c.__module__.startswith("actors.roles.") and "role" in c.__dict__
    }
    assert workers and workers <= hosted, workers - hosted
    with pytest.raises(KeyError, match="unknown actor role 'planer'"):
        actor_class("planer")  # type: ignore[arg-type]


def _subclasses(cls: type) -> set[type]:
    return {s for c in cls.__subclasses__() for s in {c, *_subclasses(c)}}


def test_the_llm_roles_are_named_in_one_table():
    """No other list, tuple or set of the four role names: every reader takes them from
    `accelopt/catalog.py` (a dict of per-role settings, e.g. output allowances, is a setting
    per role, not a second table)."""
    copies = [
        f"{_rel(p)}:{n.lineno}"
        for p, t in SOURCES
        if _rel(p) != "accelopt/catalog.py"
        for n in ast.walk(t)
        if isinstance(n, (ast.Tuple, ast.List, ast.Set))
        and {e.value for e in n.elts if isinstance(e, ast.Constant)} == LLM_ROLE_NAMES
    ]
    assert not copies, copies


def _event_names() -> set[str]:
    from accelopt import catalog as ev

    return set(ev.EVENTS_BY_NAME)


def test_every_envelope_is_built_by_the_one_builder():
    """An event's envelope (event_id, run_id, ts, causation_id) is built by
    `accelopt.catalog.envelope` only: no event constructed with its own `event_id=`, no
    dict that spells the envelope out."""
    names = _event_names()
    found = []
    for p, t in SOURCES:
        if _rel(p) == "accelopt/catalog.py":
            continue
        for n in ast.walk(t):
            if isinstance(n, ast.Call):
                func = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
                if func in names and any(k.arg == "event_id" for k in n.keywords):
                    found.append(f"{_rel(p)}:{n.lineno}: {func}(event_id=...)")
            elif isinstance(n, ast.Dict):
                keys = {k.value for k in n.keys if isinstance(k, ast.Constant)}
                if {"event_id", "run_id"} <= keys:
                    found.append(f"{_rel(p)}:{n.lineno}: an envelope dict")
    assert not found, found


# --- functions a reader can hold in view -------------------------------------------------------

MAX_FUNCTION_LINES = 80
# every installed package (hardware_agents/ included) and scripts/; benchmarks/ are one-off
# measurements, read top to bottom
SHORT_FUNCTION_FOLDERS = [*PACKAGES, "scripts"]


def test_no_function_is_over_80_lines_without_saying_why():
    """A function longer than MAX_FUNCTION_LINES says why in its docstring ("Long because ...")."""
    long = [
        f"{_rel(p)}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)"  # type: ignore[operator]
        for p, t in [
            *SOURCES,
            *((s, ast.parse(s.read_text(), str(s))) for s in (ROOT / "scripts").rglob("*.py")),
        ]
        if p.relative_to(ROOT).parts[0] in SHORT_FUNCTION_FOLDERS
        for n in ast.walk(t)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        and n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES  # type: ignore[operator]
        and "long because" not in (ast.get_docstring(n) or "").lower()
    ]
    assert not long, long


# --- classes a reader can hold in view ---------------------------------------------------------

MAX_CLASS_LINES = 400
# the classes over MAX_CLASS_LINES still to split (issue 51), each named until it is under the
# limit (the NKI emulator's executor, one interpreter of the ISA, may be longer: it is not)
LONG_CLASSES: set[str] = set()
EXEMPT_CLASSES = {"hardware_agents/neuron/emulator/execute.py:Executor"}


def _long_classes(sources: list[tuple[Path, ast.AST]]) -> dict[str, int]:
    """'file:Class' -> its lines, for the classes over MAX_CLASS_LINES."""
    return {
        f"{_rel(p)}:{n.name}": n.end_lineno - n.lineno + 1  # type: ignore[operator]
        for p, t in sources
        for n in ast.walk(t)
        if isinstance(n, ast.ClassDef) and n.end_lineno - n.lineno + 1 > MAX_CLASS_LINES  # type: ignore[operator]
    }


def test_no_new_class_is_over_400_lines():
    """No class of the installed packages grows past MAX_CLASS_LINES; one of LONG_CLASSES split
    below it leaves the list (the list only shrinks)."""
    long = _long_classes(SOURCES)
    new = {c: n for c, n in long.items() if c not in LONG_CLASSES | EXEMPT_CLASSES}
    assert not new, f"over {MAX_CLASS_LINES} lines: {new}"
    split = sorted(LONG_CLASSES - set(long))
    assert not split, f"under {MAX_CLASS_LINES} lines now, drop from LONG_CLASSES: {split}"


def test_the_class_size_check_finds_one():
    """Guards the check above: it measures a class from its line to its last."""
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_CLASS_LINES))
    tree = ast.parse(f"class Big:\n{body}class Small:\n    pass\n")
    assert _long_classes([(ROOT / "accelopt" / "x.py", tree)]) == {"accelopt/x.py:Big": MAX_CLASS_LINES + 1}


# --- the sandbox's one interface ---------------------------------------------------------------

SANDBOX = "hardware_agents.sandbox"
# the sandbox's own tests, which exercise its parts directly (Landlock, the uids, the freeze's
# process readings, the reach, the secret scrubbing, the self-check target)
SANDBOX_TESTS = {
    "tests/hardware_agents/cpu/test_cpu_sandbox.py",
    "tests/hardware_agents/cpu/test_cpu_cleanup.py",
    "tests/hardware_agents/cpu/test_sandbox_cancel.py",
    "tests/hardware_agents/cpu/test_sandbox_freeze.py",
    "tests/hardware_agents/cpu/test_sandbox_walls.py",
    "tests/hardware_agents/cpu/test_thread_confinement.py",
    "tests/hardware_agents/cpu/test_cpu_realtime.py",
    "tests/hardware_agents/test_checkout_anywhere.py",
}


@functools.cache
def _sandbox_internals() -> dict[str, list[str]]:
    """Per file outside `hardware_agents/sandbox/` (the installed packages' modules, the tests,
    scripts, benchmarks and examples): its imports of a module of the package other than its `__init__`
    (`from hardware_agents.sandbox import landlock` included), and its strings that name one (a
    "module:function" target, the launcher's `-m` name)."""
    inside = ROOT / "hardware_agents" / "sandbox"
    texts = {
        p: p.read_text()
        for folder in ("tests", "scripts", "benchmarks", "examples")
        for p in (ROOT / folder).rglob("*.py")
    }
    scripts = [(p, ast.parse(text, str(p))) for p, text in texts.items() if "sandbox" in text]
    found: dict[str, list[str]] = {}
    for path, tree in [*SOURCES, *scripts]:  # a script that never says "sandbox" cannot name it
        if path.is_relative_to(inside):
            continue
        rel = _rel(path)
        lines = [
            f"{rel} imports {m}"
            for base, subs in _imported(path, tree)
            for m in (base, *subs)
            if m.startswith(SANDBOX + ".") and _is_module(m)
        ]
        lines += [
            f"{rel}:{n.lineno} names {n.value!r}"
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith(SANDBOX + ".")
        ]
        found[rel] = lines
    return found


def test_only_the_sandbox_interface_is_imported_outside_the_sandbox():
    """`hardware_agents.sandbox` (its `__init__`) is what the agents, the actors, the command
    line, the scripts and the other tests use; its modules are its own."""
    found = [
        line for rel, lines in _sandbox_internals().items() if rel not in SANDBOX_TESTS for line in lines
    ]
    assert not found, found


def test_the_sandbox_interface_check_finds_an_internal_import():
    """Guards the check above: the sandbox's own tests reach its parts, and it sees them."""
    own = {rel: lines for rel, lines in _sandbox_internals().items() if rel in SANDBOX_TESTS}
    assert sorted(own) == sorted(SANDBOX_TESTS)
    found = [line for lines in own.values() for line in lines]
    assert any("imports hardware_agents.sandbox.landlock" in f for f in found), found
    assert any("imports hardware_agents.sandbox.uids" in f for f in found), found
    assert any("names 'hardware_agents.sandbox.probe:describe'" in f for f in found), found


# --- device families: one descriptor each, asked by everything above ------------------------

# the device families' packages; `hardware_agents/families.py` lists their descriptors
FAMILY_PACKAGES = (
    "hardware_agents.cpu",
    "hardware_agents.triton",
    "hardware_agents.neuron",
    "hardware_agents.sim",
)
REGISTRY = "hardware_agents/families.py"


def _family_of_module(name: str) -> str | None:
    return next((pkg for pkg in FAMILY_PACKAGES if name == pkg or name.startswith(pkg + ".")), None)


def _family_reach(path: Path, tree: ast.AST) -> list[str]:
    """What `path` takes from a device family it is not part of: imported modules of the
    family's package (`from hardware_agents import cpu` included) and strings that name one
    (a "module:function" target). The registry's import of each `<family>.family` (the
    descriptor) is the one allowed."""
    rel = _rel(path)
    own = _family_of_module(_module_of(path))
    found = []
    for base, subs in _imported(path, tree):
        for m in [base, *(sub for sub in subs if _is_module(sub))]:
            family = _family_of_module(m)
            if family is None or family == own or (rel == REGISTRY and m == f"{family}.family"):
                continue
            found.append(f"{rel} imports {m}")
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            family = _family_of_module(n.value.split(":", 1)[0])
            if family is not None and family != own:
                found.append(f"{rel}:{n.lineno} names {n.value!r}")
    return found


def _examples() -> list[tuple[Path, ast.AST]]:
    return [(p, ast.parse(p.read_text(), str(p))) for p in sorted((ROOT / "examples").rglob("*.py"))]


def test_the_family_packages_are_the_registrys():
    """Every subpackage of hardware_agents/ with a descriptor (`family.py`) is a family here,
    and the registry lists each one's descriptor."""
    from hardware_agents.families import FAMILIES

    with_descriptor = {
        f"hardware_agents.{p.parent.name}" for p in (ROOT / "hardware_agents").glob("*/family.py")
    }
    assert with_descriptor == set(FAMILY_PACKAGES)
    assert sorted(f.make_agent.__module__.rpartition(".")[0] for f in FAMILIES) == sorted(FAMILY_PACKAGES)


def test_nothing_outside_a_device_family_imports_its_modules():
    """The command line, the actors, the suites, the prompts, the memory, the shared parts of
    hardware_agents/ and the examples ask a kind's family through the registry
    (`hardware_agents.families`) and its descriptor; only a family reaches into itself. (The
    tests, scripts and benchmarks of a family exercise its internals and are not held to it.)"""
    found = [line for path, tree in [*SOURCES, *_examples()] for line in _family_reach(path, tree)]
    assert not found, found


def test_the_family_check_finds_an_import_and_a_target_string():
    """Guards the check above: it sees a family module imported or named from outside, and
    lets the registry import the descriptors."""
    tree = ast.parse(
        "from hardware_agents.triton.specs import _SPECS\n"
        "from hardware_agents import neuron\n"
        'T = "hardware_agents.cpu.server:serve"\n'
    )
    found = _family_reach(ROOT / "cli" / "commands" / "worker.py", tree)
    assert found == [
        "cli/commands/worker.py imports hardware_agents.triton.specs",
        "cli/commands/worker.py imports hardware_agents.neuron",
        "cli/commands/worker.py:3 names 'hardware_agents.cpu.server:serve'",
    ], found
    registry = ROOT / REGISTRY
    assert not _family_reach(registry, ast.parse("from hardware_agents.cpu.family import FAMILY"))
    assert _family_reach(registry, ast.parse("from hardware_agents.cpu.agent import CpuAgent"))
    assert not _family_reach(ROOT / "hardware_agents" / "cpu" / "agent.py", tree.body[2])  # its own


# --- inside hardware_agents/: its parts layered, and each family's stages on its agent's public API

# the parts of hardware_agents/ (a top-level module or a subpackage each), top-down, the same
# rule as the folders': a part imports only parts of the layers below its own. (The package's
# `__init__.py`, its facade, imports `base` and `pipeline.device_spec` and is no part.)
DEVICE_LAYERS: tuple[tuple[str, ...], ...] = (
    ("languages",),  # the kernel languages' lookups: they ask the registry
    ("families",),  # the registry: imports each family's descriptor
    ("cpu", "triton", "neuron", "sim"),  # the device families: none imports another
    ("family",),  # the descriptor a family fills in
    ("base",),  # HardwareAgent: runs a profile through the pipeline's stages
    ("pipeline",),  # the judging steps every agent runs, DeviceSpec and the roofline
    ("datacache", "host_memory", "index_inputs", "kernel_language", "quiet"),
    ("host_files",),  # the files every AccelOpt process of this user on the host shares
    ("sandbox",),  # the walls around untrusted code
)


def _device_part(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "hardware_agents" and len(parts) > 1 else None


DEVICE_EDGES = _edges(_device_part)


def test_every_part_of_hardware_agents_has_one_layer():
    root = ROOT / "hardware_agents"
    parts = {p.stem for p in root.glob("*.py") if p.name != "__init__.py"}
    parts |= {p.parent.name for p in root.glob("*/__init__.py")}
    placed = [part for layer in DEVICE_LAYERS for part in layer]
    assert sorted(placed) == sorted(parts) and len(set(placed)) == len(placed), (placed, parts)


def test_no_part_of_hardware_agents_imports_its_own_layer_or_one_above():
    """base.py imported the pipeline and the pipeline's roofline imported base.py's DeviceSpec
    (the one upward arrow here, until DeviceSpec moved into `pipeline/device_spec.py`)."""
    assert not _upward(DEVICE_EDGES, DEVICE_LAYERS)


def test_the_parts_of_hardware_agents_import_each_other_in_no_circle():
    graph: dict[str, set[str]] = defaultdict(set)
    for src, dst in DEVICE_EDGES:
        graph[src].add(dst)
    assert not _cycles(graph)


def test_the_device_checker_sees_the_parts():
    """Guards the checks above against passing on an empty or misparsed graph."""
    assert DEVICE_EDGES[("base", "pipeline")] and DEVICE_EDGES[("triton", "pipeline")]
    assert DEVICE_EDGES[("families", "cpu")] and DEVICE_EDGES[("pipeline", "sandbox")]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _is_agent(node: ast.AST) -> bool:
    """A name `agent` or an attribute `.agent` (a stage's `self.agent`)."""
    return (isinstance(node, ast.Name) and node.id == "agent") or (
        isinstance(node, ast.Attribute) and node.attr == "agent"
    )


def _agent_privates(path: Path, tree: ast.AST) -> list[str]:
    """`agent._x` and `self.agent._x` in `tree`: a private member of an agent reached from
    outside its class; and a private member a Protocol declares (a seam that needs one)."""
    found = [
        f"{_rel(path)}:{n.lineno} {ast.unparse(n)}"
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and _private(n.attr) and _is_agent(n.value)
    ]
    for cls in ast.walk(tree):
        if isinstance(cls, ast.ClassDef) and any(ast.unparse(b).endswith("Protocol") for b in cls.bases):
            for item in cls.body:
                name = (
                    item.name
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                    else ast.unparse(item.target)
                    if isinstance(item, ast.AnnAssign)
                    else ""
                )
                if _private(name):
                    found.append(f"{_rel(path)}:{item.lineno} {cls.name} declares {name}")
    return found


def test_no_stage_reaches_a_private_member_of_its_agent():
    """A family's stages (`<family>/stages.py`, the sim's `SimStages`) use their agent's public
    device context (the `Protocol` each declares: `CpuDevice`, `TritonDevice`, `NeuronDevice`)
    or own the per-profile helpers (`cpu/oracle.baseline_oracle`, `triton/request.py`); no
    code of the installed packages reaches into an agent's private members."""
    found = [line for path, tree in SOURCES for line in _agent_privates(path, tree)]
    assert not found, found


def test_the_private_member_check_finds_one():
    """Guards the check above: it sees `agent._x`, `self.agent._x` and a Protocol's private
    member, and lets a class use its own (`self._x`) and a Protocol's public members."""
    tree = ast.parse(
        "class Device(Protocol):\n"
        "    data: int\n"
        "    _spec: int\n"
        "    def fail(self) -> None: ...\n"
        "    def _policy(self) -> None: ...\n"
        "class S(Stages[Device]):\n"
        "    def setup(self):\n"
        "        agent = self.agent\n"
        "        self.v = Verdict(self.agent._fail)\n"
        "        agent._device_lock(); agent.fail(); self._own(); agent.__class__\n"
    )
    found = _agent_privates(ROOT / "hardware_agents" / "cpu" / "stages.py", tree)
    assert found == [
        "hardware_agents/cpu/stages.py:9 self.agent._fail",
        "hardware_agents/cpu/stages.py:10 agent._device_lock",
        "hardware_agents/cpu/stages.py:3 Device declares _spec",
        "hardware_agents/cpu/stages.py:5 Device declares _policy",
    ], found
