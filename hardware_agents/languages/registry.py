"""The registry itself: the `KernelLanguage` record, registration and lookup (re-exported by
`hardware_agents.languages`, which also registers the built-in languages)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from accelopt.problem import LANGUAGE_NAME, Problem, add_language_name

__all__ = [
    "KernelLanguage",
    "TunerSyntax",
    "UnknownLanguageError",
    "fence",
    "find_language",
    "get_language",
    "language_names",
    "register_language",
    "tuner_syntaxes",
]

_NAME = re.compile(LANGUAGE_NAME)


class UnknownLanguageError(LookupError):
    """No kernel language is registered under a name; the message names the known ones."""


@dataclass(frozen=True)
class TunerSyntax:
    """How `builtin/tuner` (`actors/llm/tuner.py`) finds and edits a language's tunable constants.

    `constant` matches one definition, with the groups `name` and `value` (the value's span is
    what the tuner rewrites); `diff` matches a `-`/`+` line of a diff that sets one (groups
    `sign`, `name`, `value`), to read an insight's changes. The tuner sees only the kernel's
    text, so it picks the syntax by content: the first registered syntax whose `detect`
    matches the source, else the first one without `detect` (the fallback).
    """

    name: str
    constant: re.Pattern[str]
    diff: re.Pattern[str]
    detect: re.Pattern[str] | None = None


@dataclass(frozen=True)
class KernelLanguage:
    """One kernel language (see the module doc). Templates are `<role>.<name>.txt` for the
    roles planner, executor, fixer and summarizer, plus `primer.<name>.txt`, in `prompt_dir`
    (None: the `prompts` package)."""

    name: str
    fence: str  # tag of its fenced code blocks in prompts
    entry: str  # entry-point name when the problem's baseline names none
    entry_file: str  # source file name when the baseline's entry point names none
    extension: str  # of `best/<problem><extension>` in a run directory
    interface_lines: Callable[[Problem], list[str]]  # how the harness calls this problem's kernel
    output_rule: str  # the correctness bar's sentence about the outputs
    numpy_reference: bool = False  # show the definition's numpy reference when it has one
    tuner: TunerSyntax | None = None  # None: the tuner finds no constant to change
    complete_source: Callable[[str, str], str] | None = None  # (reply's code, entry) -> the module to profile
    prompt_dir: Path | None = None
    aliases: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        for n in (self.name, *self.aliases):
            if not _NAME.fullmatch(n):
                raise ValueError(
                    f"kernel language name {n!r}: use 1-32 of a-z, 0-9, _, + or -, starting with a letter"
                )
        if not self.extension.startswith("."):
            raise ValueError(
                f"kernel language {self.name!r}: extension {self.extension!r} must start with '.'"
            )


_languages: dict[str, KernelLanguage] = {}  # name and aliases -> language
_lock = threading.Lock()


def register_language(language: KernelLanguage) -> KernelLanguage:
    """Make `language` known under its name and aliases. Re-registering a name replaces it."""
    with _lock:
        for n in (language.name, *language.aliases):
            _languages[n] = language
            add_language_name(n)  # solution files may name it
    return language


def find_language(name: str) -> KernelLanguage | None:
    """The language registered as `name` (case-insensitive), or None."""
    key = name.lower()
    found = _languages.get(key)
    if found is None:
        from hardware_agents.base import _discover  # plugins register theirs on import

        _discover()
        found = _languages.get(key)
    return found


def language_names() -> tuple[str, ...]:
    """Registered language names (aliases left out), in registration order."""
    return tuple(dict.fromkeys(lang.name for lang in _languages.values()))


def get_language(name: str) -> KernelLanguage:
    found = find_language(name)
    if found is None:
        aliases = sorted(n for n, lang in _languages.items() if n != lang.name)
        raise UnknownLanguageError(
            f"unknown kernel language {name!r}; known: {', '.join(language_names())}"
            + (f" (aliases: {', '.join(aliases)})" if aliases else "")
        )
    return found


def tuner_syntaxes() -> tuple[TunerSyntax, ...]:
    """The distinct tuner syntaxes of the registered languages, in registration order."""
    out: dict[int, TunerSyntax] = {}
    for lang in list(_languages.values()):
        if lang.tuner is not None:
            out.setdefault(id(lang.tuner), lang.tuner)
    return tuple(out.values())


def fence(content: str, lang: str = "") -> str:
    """`content` in a fenced block whose fence is longer than any backtick run inside it."""
    longest = max((len(m) for m in re.findall(r"`+", content)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{content.rstrip()}\n{ticks}"
