"""The optimization memory (see docs/memory.md): a LanceDB table of slow->fast kernel pairs with their
insights, embedded with sentence-transformers and retrieved by similarity.

The table is a projection of `MemoryEntryAdded` events (the memory curator actor keeps it
up to date; `rebuild_from_logs` rebuilds it). Public API:

- `MemoryIndex.open(uri, *, embedder=None, table="memory", storage_options=None,
  read_consistency_s=0.0)`; `upsert`, `get`, `has_ids`, `wait_for_ids`, `search`, `list`,
  `count`, `stats`, `create_vector_index`, `optimize`, `drop`; `search(query, SearchQuery(...))`
  (how many, which entries, ranked how).
- `export_jsonl(index, path, filters)`, `import_jsonl(index, path)`,
  `rebuild_from_logs(index, paths)`, `rebuild_from_nats(index, url)` (memory_index/transfer.py).
- `Embedder(model=None, *, device="cpu")`: the bundled all-MiniLM-L6-v2 by default.
- `query_for(problem, op_type, device, language, kernel_source_or_plan)`: the query text.
- `format_for_prompt(insights)`: the planner's memory block.
"""

from memory_index.embedder import DEFAULT_MODEL, Embedder
from memory_index.retrieval import (
    DEFAULT_TOP_M,
    Filters,
    SearchQuery,
    collapse_near_duplicates,
    format_for_prompt,
    query_for,
)
from memory_index.schema import embed_text, is_noop
from memory_index.store import MemoryIndex, MemoryIndexError, default_uri, normalize_uri
from memory_index.transfer import (
    entries_from_logs,
    export_jsonl,
    import_jsonl,
    read_jsonl,
    rebuild_from_logs,
    rebuild_from_nats,
)
from memory_index.upkeep import MemoryStats

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_TOP_M",
    "Embedder",
    "Filters",
    "MemoryIndex",
    "MemoryIndexError",
    "MemoryStats",
    "SearchQuery",
    "collapse_near_duplicates",
    "default_uri",
    "embed_text",
    "entries_from_logs",
    "export_jsonl",
    "format_for_prompt",
    "import_jsonl",
    "is_noop",
    "normalize_uri",
    "query_for",
    "read_jsonl",
    "rebuild_from_logs",
    "rebuild_from_nats",
]
