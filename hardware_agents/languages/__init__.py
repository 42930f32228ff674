"""The kernel-language lookups: the languages the device families bring, by name.

A `KernelLanguage` (`hardware_agents/kernel_language.py`) holds every fact the prompts, the
reply parser, the profiler actor, the run directory and the offline tuner need about a
language. Languages are not registered on their own: each comes with the device family that
runs it (`DeviceFamily.languages`, see docs/adding-a-device.md), so the built-in ones (`c`,
`triton` with the alias `python`, `nki`) are those of the built-in families
(`hardware_agents/families.py`), and a plugin's language is found on the first lookup that
misses (the installed `accelopt.devices` entry points are loaded once before a name is refused).
"""

from __future__ import annotations

from hardware_agents.families import language_named, registered_languages
from hardware_agents.kernel_language import KernelLanguage, TunerSyntax, UnknownLanguageError, fence

__all__ = [
    "KernelLanguage",
    "TunerSyntax",
    "UnknownLanguageError",
    "fence",
    "find_language",
    "get_language",
    "language_names",
    "tuner_syntaxes",
]


def find_language(name: str) -> KernelLanguage | None:
    """The language registered as `name` (case-insensitive), or None."""
    return language_named(name.lower())


def language_names() -> tuple[str, ...]:
    """Registered language names (aliases left out), in registration order."""
    return tuple(lang.name for lang in registered_languages())


def get_language(name: str) -> KernelLanguage:
    found = find_language(name)
    if found is None:
        aliases = sorted(a for lang in registered_languages() for a in lang.aliases)
        raise UnknownLanguageError(
            f"unknown kernel language {name!r}; known: {', '.join(language_names())}"
            + (f" (aliases: {', '.join(aliases)})" if aliases else "")
        )
    return found


def tuner_syntaxes() -> tuple[TunerSyntax, ...]:
    """The distinct tuner syntaxes of the registered languages, in registration order."""
    out: dict[int, TunerSyntax] = {}
    for lang in registered_languages():
        if lang.tuner is not None:
            out.setdefault(id(lang.tuner), lang.tuner)
    return tuple(out.values())
