"""Run settings of the memory (the `memory:` section of a run config)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

ENV_URI = "ACCELOPT_MEMORY"


def default_uri() -> str:
    """`$ACCELOPT_MEMORY`, else `~/.accelopt/memory` (one local memory shared by all runs)."""
    return os.environ.get(ENV_URI) or str(Path("~/.accelopt/memory").expanduser())


class MemoryConfig(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """`enabled=False` turns retrieval and writing off (the memory ablation).

    Filters narrow what the planner may see; by default it sees insights from every
    problem, device and language, ranked by similarity.
    """

    enabled: bool = True
    uri: str | None = None
    """A folder or `s3://bucket/prefix`; None means `default_uri()`."""
    table: str = "memory"
    model: str | None = None
    """sentence-transformers model name or path; None: the bundled all-MiniLM-L6-v2."""
    top_m: int = 16
    devices: list[str] | None = None
    languages: list[str] | None = None
    op_types: list[str] | None = None
    min_speedup: float | None = None
    exclude_same_problem: bool = False
    wait_for_index_s: float = 30.0
    """How long the coordinator waits for the curator to index the entries it emitted."""
    storage_options: dict[str, str] = {}

    def resolved_uri(self) -> str:
        return self.uri or default_uri()

    def search_kwargs(self, problem: str) -> dict[str, Any]:
        """Keyword arguments for `MemoryIndex.search` when retrieving for `problem`."""
        return {
            "top_m": self.top_m,
            "device": self.devices,
            "language": self.languages,
            "op_type": self.op_types,
            "min_speedup": self.min_speedup,
            "exclude_problem": problem if self.exclude_same_problem else None,
        }
