"""One row per LLM role: the catalog's entry (`accelopt/catalog.py`: request, stage, output
allowance) and the role's row (`actors/llm/role_table.py`: context builder, answer, the
offline tuner's reply, MCP arguments), and no other module of the project branches on a
role's name. So a role is added where its row is (docs/architecture.md walks it;
tests/actors/llm/test_new_role.py takes the walk)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from accelopt import catalog as ev

ROOT = Path(__file__).resolve().parent.parent
ROWS = {"accelopt/catalog.py", "actors/llm/role_table.py"}  # where role names are the data


def _packages() -> list[str]:
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    return [name.rstrip("*") for name in find["include"]]


def _is_name(node: ast.AST | None, names: set[str]) -> bool:
    return isinstance(node, ast.Constant) and node.value in names


def _names_a_role(node: ast.AST, names: set[str]) -> bool:
    """A role's name, or a tuple, list or set literal that holds one."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_name(e, names) for e in node.elts)
    return _is_name(node, names)


def role_branches(tree: ast.AST, names: set[str]) -> list[int]:
    """Lines of `tree` that branch on a role's name: a comparison with one (`role ==
    "planner"`, `role in ("executor", "fixer")`), a `case "planner":`, a mapping keyed by one
    (a per-role table), or a literal set or sequence of them (`frozenset({"executor"})`).
    A role named as an argument (`for_role("planner")`) is a lookup, not a branch."""
    lines = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Compare):
            hit = any(_names_a_role(x, names) for x in (n.left, *n.comparators))
        elif isinstance(n, ast.match_case):
            hit = any(isinstance(p, ast.MatchValue) and _is_name(p.value, names) for p in ast.walk(n.pattern))
        elif isinstance(n, ast.Dict):
            hit = any(_is_name(k, names) for k in n.keys)
        elif isinstance(n, (ast.Tuple, ast.List, ast.Set)):
            hit = any(_is_name(e, names) for e in n.elts)
        else:
            continue
        if hit:
            lines.append(getattr(n, "lineno", 0) or getattr(n.pattern, "lineno", 0))
    return sorted(set(lines))


def test_every_llm_role_is_one_row_of_the_table():
    """The rows are the catalog's roles, in its order, each holding the catalog's entry."""
    from actors.llm.role_table import ROLE_ROWS

    assert list(ROLE_ROWS) == list(ev.LLM_ROLES)
    for spec in ev.LLM_ROLE_TABLE:
        assert ROLE_ROWS[spec.name].spec is spec, spec.name


def test_no_module_outside_the_rows_branches_on_a_role_name():
    names = set(ev.LLM_ROLES)
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for pkg in _packages()
        for path in sorted((ROOT / pkg).rglob("*.py"))
        if str(path.relative_to(ROOT)) not in ROWS
        for line in role_branches(ast.parse(path.read_text(), str(path)), names)
    ]
    assert not found, f"branches on a role's name outside its row (actors/llm/role_table.py): {found}"


def test_the_branch_check_finds_each_kind_of_branch():
    """Guards the check above: each way of branching on a role is found, a lookup is not."""
    names = {"planner", "executor", "fixer", "summarizer"}
    code = [
        'if role == "planner": pass',
        'ok = role in ("executor", "fixer")',
        'match role:\n    case "fixer" | "planner":\n        pass',
        'LIMITS = {"summarizer": 8192}',
        'KERNEL_ROLES = frozenset({"executor", "fixer"})',
    ]
    for text in code:
        assert role_branches(ast.parse(text), names), text
    assert not role_branches(ast.parse('model = cfg.llm.for_role("planner").model'), names)
