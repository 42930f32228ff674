"""Prompt templates of the four LLM roles, per kernel language (see docs/architecture.md, paper §2).

Templates are text files: `<role>.<language>.txt` (roles planner, executor, fixer,
summarizer), each with a `=== system ===` and a `=== user ===` section, plus
`primer.<language>.txt` (the language and device primer with the profile glossary). The
built-in languages (c, triton, nki) ship theirs in this package; a language registered with
a `prompt_dir` (`hardware_agents/languages`) has them there. Every other fact about a
language (fence tag, default entry name, interface lines, correctness wording) comes from
its `KernelLanguage` record. Placeholders are `{{name}}`; every placeholder must be filled and
values are inserted verbatim (never re-scanned).

They stay close to the paper's prompts (planner: one single-step plan; executor: the full
kernel in one fenced block; fixer: code + error log -> fixed full kernel; summarizer: a
`**title**` line, a general description, original/optimized snippets, or "No optimization
found") and fix its bugs: the summarizer gets the speedup; the problem shows its concrete
shapes (axis values) and the true correctness bar; the planner gets the whole profile
(latency, % of peak, bound, counters) with its lines shuffled deterministically by (run
seed, request id), and the retrieved insights with the device, language and speedup of
each; the fixer also sees the last version that compiled.

Public API: `render(role, language, **context) -> list[ChatMessage]`, `ROLES`, `LANGUAGES`,
`template_text(name)`, and the formatters in `prompts.format`.

Context per role (all keyword arguments):
- planner: problem: Problem, source: str, profile: Profile | None, insights:
  Sequence[RetrievedInsight] = (), device: str, seed: int, request_id: str
- executor: problem, source, plan: str, device
- fixer: problem, source, error_log: str, status: str, parent_source: str = "", device
- summarizer: problem: Problem | None, slow_source, fast_source, speedup: float,
  positive: bool = True, device
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any

from accelopt.catalog import LLM_ROLES
from accelopt.problem import Problem
from accelopt.records import ChatMessage
from hardware_agents.languages import KernelLanguage, UnknownLanguageError, get_language, language_names
from prompts.format import fence, format_problem, format_profile, format_speedup

ROLES: tuple[str, ...] = LLM_ROLES  # a template per LLM role (the roles: `accelopt.catalog.LLM_ROLE_TABLE`)
LANGUAGES = tuple(
    n for n in language_names() if get_language(n).prompt_dir is None
)  # templates in this package

_PLACEHOLDER = re.compile(r"\{\{([a-z_]+)\}\}")
_SECTION = re.compile(r"^=== (system|user) ===\n", re.MULTILINE)

__all__ = ["LANGUAGES", "ROLES", "PromptError", "render", "template_text"]


class PromptError(ValueError):
    pass


def _language(language: str) -> KernelLanguage:
    """The registered language (an alias such as `python` gives `triton`)."""
    try:
        return get_language(language)
    except UnknownLanguageError as e:
        raise PromptError(f"no prompts: {e.args[0]}") from None


@cache
def template_text(name: str) -> str:
    """The text of a template file of this package (e.g. "planner.c.txt")."""
    try:
        return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise PromptError(f"prompt template {name!r} is missing from the prompts package") from e


def _template(lang: KernelLanguage, name: str) -> str:
    """A template of `lang`: from its `prompt_dir`, or this package when it has none."""
    if lang.prompt_dir is None:
        return template_text(name)
    path = lang.prompt_dir / name
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise PromptError(
            f"prompt template {name!r} of kernel language {lang.name!r} is missing: {path}"
        ) from e


def _fill(template: str, values: dict[str, str], name: str) -> str:
    missing = sorted({m for m in _PLACEHOLDER.findall(template) if m not in values})
    if missing:
        raise PromptError(f"{name}: no value for {', '.join(missing)}")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def _sections(text: str, name: str) -> dict[str, str]:
    parts = _SECTION.split(text)
    if len(parts) != 5 or parts[1] != "system" or parts[3] != "user":
        raise PromptError(f"{name}: expected a '=== system ===' then a '=== user ===' section")
    return {"system": parts[2], "user": parts[4]}


def _entry(problem: Problem | None, lang: KernelLanguage) -> str:
    if problem is not None:
        try:
            return problem.baseline.entry_symbol
        except (IndexError, AttributeError):
            pass
    return lang.entry


def _need(ctx: dict[str, Any], role: str, *keys: str) -> None:
    missing = [k for k in keys if k not in ctx]
    if missing:
        raise PromptError(f"render({role!r}): missing context {', '.join(missing)}")


def _experiences(insights: Sequence[Any], device: str, language: str) -> str:
    if not insights:
        return ""
    from memory_index import format_for_prompt

    return "\n" + format_for_prompt(list(insights), device=device, language=language)


def _values(role: str, lang: KernelLanguage, ctx: dict[str, Any]) -> dict[str, str]:
    tag = lang.fence
    problem: Problem | None = ctx.get("problem")
    device = str(ctx.get("device", "cpu"))
    v = {
        "primer": _template(lang, f"primer.{lang.name}.txt").strip(),
        "device": device,
        "entry": _entry(problem, lang),
    }
    if role in ("planner", "executor", "fixer"):
        _need(ctx, role, "problem", "source")
        assert problem is not None
        v["problem"] = format_problem(problem, lang.name)
        v["source"] = fence(ctx["source"], tag)
    if role == "planner":
        _need(ctx, role, "seed", "request_id")
        v["profile"] = format_profile(
            ctx.get("profile"), seed=int(ctx["seed"]), request_id=str(ctx["request_id"])
        )
        v["experiences"] = _experiences(ctx.get("insights") or (), device, lang.name)
    elif role == "executor":
        _need(ctx, role, "plan")
        v["plan"] = fence(ctx["plan"], "text")
    elif role == "fixer":
        _need(ctx, role, "error_log")
        v["status"] = str(ctx.get("status") or "failed")
        log = ctx["error_log"].strip() or "(the harness gave no log)"
        v["error_log"] = fence(log, "text")
        parent = (ctx.get("parent_source") or "").strip()
        v["parent_section"] = (
            (
                "\n# Last working version\nThe wrong code was derived from this version, which compiles and "
                "passes the checks. Keep the wrong code's optimization if you can fix it; otherwise fall "
                "back to this version.\n" + fence(parent, tag) + "\n"
            )
            if parent
            else ""
        )
    elif role == "summarizer":
        _need(ctx, role, "slow_source", "fast_source", "speedup")
        v["problem_name"] = problem.name if problem is not None else str(ctx.get("problem_name", "unknown"))
        v["slow_source"] = fence(ctx["slow_source"], tag)
        v["fast_source"] = fence(ctx["fast_source"], tag)
        v["speedup"] = format_speedup(
            float(ctx["speedup"]),
            positive=bool(ctx.get("positive", True)),
            device=device,
            estimated=bool(ctx.get("estimated", False)),
        )
    return v


def render(role: str, language: str, **context: Any) -> list[ChatMessage]:
    """The system and user messages of `role` for a kernel in `language` (see module doc)."""
    if role not in ROLES:
        raise PromptError(f"unknown role {role!r}; known: {', '.join(ROLES)}")
    lang = _language(language)
    name = f"{role}.{lang.name}.txt"
    sections = _sections(_template(lang, name), name)
    values = _values(role, lang, context)
    return [
        ChatMessage(role="system", content=_fill(sections["system"], values, name).strip() + "\n"),
        ChatMessage(role="user", content=_fill(sections["user"], values, name).strip() + "\n"),
    ]
