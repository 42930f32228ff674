"""Completing a model's NKI code block into the module the Neuron harness imports (the `nki`
language's `complete_source`, see `hardware_agents/neuron/family.py`)."""

from __future__ import annotations

import re

NKI_IMPORTS = (
    ("np", "import numpy as np"),
    ("nki", "import neuronxcc.nki as nki"),
    ("nl", "import neuronxcc.nki.language as nl"),
    ("nisa", "import neuronxcc.nki.isa as nisa"),
)
NKI_ENTRY_ALIASES = ("optimized_kernel",)
"""Entry names the AccelOpt paper's prompts let a model use besides `kernel`."""


def _binds(code: str, name: str) -> bool:
    n = re.escape(name)
    return (
        re.search(
            rf"^[ \t]*(?:import\s+[\w.]+\s+as\s+{n}\b|import\s+{n}\b|from\s+\S+\s+import\s+[^\n]*\b{n}\b|"
            rf"def\s+{n}\b|{n}\s*=)",
            code,
            re.MULTILINE,
        )
        is not None
    )


def complete_nki_module(code: str, entry: str) -> str:
    """An NKI module as the harness imports it (nothing is injected there): the standard imports
    it uses without importing them are added at the top, and a module that defines only the
    alias `optimized_kernel` gets `entry = optimized_kernel`. Anything else is left as it is."""
    missing = [
        line for alias, line in NKI_IMPORTS if re.search(rf"\b{alias}\.", code) and not _binds(code, alias)
    ]
    out = code
    if missing:
        lines = out.split("\n")
        at = 0  # after a docstring-free run of `from __future__` imports
        while at < len(lines) and lines[at].startswith("from __future__"):
            at += 1
        out = "\n".join(lines[:at] + missing + lines[at:])
    if not _binds(out, entry):
        alias = next((a for a in NKI_ENTRY_ALIASES if re.search(rf"^def\s+{a}\b", out, re.MULTILINE)), None)
        if alias is not None:
            out = out.rstrip("\n") + f"\n\n{entry} = {alias}\n"
    return out
