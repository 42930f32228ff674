"""The kernel-language registry: every fact AccelOpt needs about a kernel language, in one record.

A `KernelLanguage` holds what the prompts, the reply parser, the profiler actor, the run
directory and the offline tuner need to know about a language: its code-fence tag, the
default entry-point name, the source file name and extension, how the harness calls a kernel
(the prompt's interface lines, per problem), the correctness bar's wording about outputs,
which reference the problem section shows, where its prompt templates are, how a reply's
code is completed into a module, and the syntax of its tunable constants. Nothing else
branches on a language's name: a new language is one `register_language(...)` call (see
docs/adding-a-device.md, "A new kernel language"). The built-in languages (`c`, `triton`
with the alias `python`, `nki`) are registered in `hardware_agents/languages/builtin.py`.

A language that an installed plugin registers (from its `accelopt.devices` entry point, next
to its device kind) is found on first lookup: `get_language` runs the device discovery of
`hardware_agents/base.py` once before it gives up on a name.
"""

from hardware_agents.languages.registry import (
    KernelLanguage,
    TunerSyntax,
    UnknownLanguageError,
    fence,
    find_language,
    get_language,
    language_names,
    register_language,
    tuner_syntaxes,
)

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

from hardware_agents.languages import builtin as _builtin

del _builtin
