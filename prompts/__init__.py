"""Prompt templates of the LLM roles, per kernel language (see docs/architecture.md, paper §2).

Templates are text files: `<role>.<language>.txt`, or `<role>.txt` for every language of a
role that has no template of the language's own, each with a `=== system ===` and a
`=== user ===` section, plus `primer.<language>.txt` (the language and device primer with
the profile glossary). The built-in languages (c, triton, nki) ship theirs in this package;
a language registered with a `prompt_dir` (`hardware_agents/languages`) has them there. Every
other fact about a language (fence tag, default entry name, interface lines, correctness
wording) comes from its `KernelLanguage` record. Placeholders are `{{name}}`; every
placeholder must be filled and values are inserted verbatim (never re-scanned).

This package knows no role: what a role's placeholders hold is its row's context builder
(`actors/llm/role_table.py`: `render(role, language, **context)` renders a role's prompt from
its context), which hands `render_template` the values; every template may also use
`primer`, `device` and `entry` (the problem's entry symbol), filled here.

They stay close to the paper's prompts (planner: one single-step plan; executor: the full
kernel in one fenced block; fixer: code + error log -> fixed full kernel; summarizer: a
`**title**` line, a general description, original/optimized snippets, or "No optimization
found") and fix its bugs: the summarizer gets the speedup; the problem shows its concrete
shapes (axis values) and the true correctness bar; the planner gets the whole profile
(latency, % of peak, bound, counters) with its lines shuffled deterministically by (run
seed, request id), and the retrieved insights with the device, language and speedup of
each; the fixer also sees the last version that compiled.

Public API: `render_template(role, language, values, problem=..., device=...) ->
list[ChatMessage]`, `role_template(role, language)`, `ROLES`, `LANGUAGES`,
`template_text(name)`, `language_of(name)`, and the formatters in `prompts.format`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from importlib import resources

from accelopt.catalog import LLM_ROLES
from accelopt.problem import Problem
from accelopt.records import ChatMessage
from hardware_agents.languages import KernelLanguage, UnknownLanguageError, get_language, language_names

ROLES: tuple[str, ...] = LLM_ROLES  # a template per LLM role (the roles: `accelopt.catalog.LLM_ROLE_TABLE`)
LANGUAGES = tuple(
    n for n in language_names() if get_language(n).prompt_dir is None
)  # templates in this package

_PLACEHOLDER = re.compile(r"\{\{([a-z_]+)\}\}")
_SECTION = re.compile(r"^=== (system|user) ===\n", re.MULTILINE)

__all__ = [
    "LANGUAGES",
    "ROLES",
    "PromptError",
    "language_of",
    "render_template",
    "role_template",
    "template_text",
]


class PromptError(ValueError):
    pass


def language_of(language: str) -> KernelLanguage:
    """The registered language (an alias such as `python` gives `triton`); PromptError naming
    the languages for one that is not registered."""
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


def role_template(role: str, language: str | KernelLanguage) -> tuple[str, str]:
    """(text, file name) of `role`'s template for `language`: the language's own, else the
    role's template for every language (`<role>.txt`, in this package); missing both, the
    error names the language's."""
    lang = language if isinstance(language, KernelLanguage) else language_of(language)
    name = f"{role}.{lang.name}.txt"
    try:
        return _template(lang, name), name
    except PromptError:
        every = f"{role}.txt"
        if not resources.files(__package__).joinpath(every).is_file():
            raise
        return template_text(every), every


def render_template(
    role: str,
    language: str,
    values: Mapping[str, str],
    *,
    problem: Problem | None = None,
    device: str = "cpu",
) -> list[ChatMessage]:
    """The system and user messages of `role`'s template for a kernel in `language`, its
    placeholders filled with `values` and the ones every template may use (`primer`, `device`,
    `entry`: `problem`'s entry symbol, else the language's default)."""
    lang = language_of(language)
    text, name = role_template(role, lang)
    sections = _sections(text, name)
    common = {
        "primer": _template(lang, f"primer.{lang.name}.txt").strip(),
        "device": device,
        "entry": _entry(problem, lang),
    }
    filled = {**common, **values}
    return [
        ChatMessage(role="system", content=_fill(sections["system"], filled, name).strip() + "\n"),
        ChatMessage(role="user", content=_fill(sections["user"], filled, name).strip() + "\n"),
    ]
