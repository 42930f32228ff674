"""The `KernelLanguage` record: every fact AccelOpt needs about a kernel language.

A `KernelLanguage` holds what the prompts, the reply parser, the profiler actor, the run
directory and the offline tuner need to know about a language: its code-fence tag, the
default entry-point name, the source file name and extension, how the harness calls a kernel
(the prompt's interface lines, per problem), the correctness bar's wording about outputs,
which reference the problem section shows, where its prompt templates are, how a reply's
code is completed into a module, and the syntax of its tunable constants. Nothing else
branches on a language's name.

A language is brought by the device family that runs it (`DeviceFamily.languages`,
`hardware_agents/family.py`); the lookups are in `hardware_agents/languages`. The pieces
several families share (the Python tuner syntax, the NaN-filled outputs rule) are here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from accelopt.problem import LANGUAGE_NAME, Problem

__all__ = [
    "NAN_FILLED_OUTPUTS",
    "PYTHON_CONSTANTS",
    "KernelLanguage",
    "TunerSyntax",
    "UnknownLanguageError",
    "fence",
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
        for n in self.names():
            if not _NAME.fullmatch(n):
                raise ValueError(
                    f"kernel language name {n!r}: use 1-32 of a-z, 0-9, _, + or -, starting with a letter"
                )
        if not self.extension.startswith("."):
            raise ValueError(
                f"kernel language {self.name!r}: extension {self.extension!r} must start with '.'"
            )

    def names(self) -> tuple[str, ...]:
        """Its name, then its aliases."""
        return (self.name, *self.aliases)


# Python (Triton, NKI): a module-level `UPPER_CASE = <int>` (optionally annotated, or a quoted
# identifier); the fallback for sources no other syntax claims.
PYTHON_CONSTANTS = TunerSyntax(
    name="python-constant",
    constant=re.compile(
        r"^(?P<pre>(?P<name>[A-Z_][A-Z0-9_]*)[ \t]*(?::[ \t]*[\w.\[\]]+[ \t]*)?=[ \t]*)"
        r"(?P<value>\d+|[\"']?[A-Za-z_]\w*[\"']?)(?P<post>[ \t]*(?:#[^\n]*)?)$",
        re.MULTILINE,
    ),
    diff=re.compile(
        r"^(?P<sign>[-+])(?P<name>[A-Z_][A-Z0-9_]*)[ \t]*(?::[^=\n]*)?=[ \t]*(?P<value>\d+)", re.MULTILINE
    ),
)

NAN_FILLED_OUTPUTS = (
    "Output buffers are filled with NaN before each call, so every output element must be written. "
)
"""The output rule of a destination-passing convention whose harness poisons the outputs."""


def fence(content: str, lang: str = "") -> str:
    """`content` in a fenced block whose fence is longer than any backtick run inside it."""
    longest = max((len(m) for m in re.findall(r"`+", content)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{content.rstrip()}\n{ticks}"
