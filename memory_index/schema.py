"""The table layout (see docs/memory.md) and the conversions between `MemoryEntry` and Arrow rows.

One row per memory entry: the `MemoryEntry` fields, a `noop` flag computed on the way in
(insights that found nothing are kept, but never retrieved) and the `embedding` of
`embed_text(entry)`. The embedding model and dimension are recorded in the schema
metadata so a table is never searched with vectors of another model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

from accelopt.records import MemoryEntry

SCHEMA_VERSION = "1"
VECTOR_COLUMN = "embedding"
META_SCHEMA = b"accelopt.memory.schema"
PK_KEY = b"lance-schema:unenforced-primary-key:position"
META_MODEL = b"accelopt.memory.embedding_model"
META_DIM = b"accelopt.memory.embedding_dim"

ENTRY_FIELDS: tuple[str, ...] = tuple(MemoryEntry.__struct_fields__)
"""Columns holding the MemoryEntry itself (everything but `noop` and `embedding`)."""

LIGHT_COLUMNS: tuple[str, ...] = tuple(f for f in ENTRY_FIELDS if f not in ("slow_kernel", "fast_kernel"))
"""Columns worth reading for listings and retrieval (the kernels can be large)."""

_NOOP_MARKER = "no optimization found"


def table_schema(dim: int, model: str) -> pa.Schema:
    fields = [
        # The primary-key marker makes concurrent merge-inserts of one id conflict (and retry)
        # instead of both inserting it: without it two writers can duplicate a row.
        pa.field("id", pa.string(), nullable=False, metadata={PK_KEY: b"1"}),
        pa.field("source_run", pa.string()),
        pa.field("problem", pa.string()),
        pa.field("op_type", pa.string()),
        pa.field("device", pa.string()),
        pa.field("language", pa.string()),
        pa.field("slow_kernel", pa.string()),
        pa.field("fast_kernel", pa.string()),
        pa.field("speedup", pa.float64()),
        pa.field("title", pa.string()),
        pa.field("text", pa.string()),
        pa.field("created_at", pa.float64()),
        pa.field("positive", pa.bool_()),
        pa.field("noop", pa.bool_()),
        pa.field(VECTOR_COLUMN, pa.list_(pa.float32(), dim)),
    ]
    return pa.schema(fields, metadata={META_SCHEMA: SCHEMA_VERSION, META_MODEL: model, META_DIM: str(dim)})


def schema_model(schema: pa.Schema) -> tuple[str | None, int | None]:
    """(embedding model, dim) recorded in a table's schema, or (None, None) for a foreign table."""
    meta = schema.metadata or {}
    model = meta.get(META_MODEL)
    dim = meta.get(META_DIM)
    return (model.decode() if model else None, int(dim) if dim else None)


def humanize(name: str) -> str:
    """`add_rmsnorm_matmul` -> `add rmsnorm matmul` (word pieces embed better than one token)."""
    return re.sub(r"[_\-./]+", " ", name).strip()


def embed_text(entry: MemoryEntry) -> str:
    """What is embedded: the operator first (so truncation never drops it), then the insight.

    Device and language are deliberately absent: an insight learned in C on the CPU must be
    found for the same operator in NKI on Trainium (they are filters, not similarity).
    """
    head = humanize(entry.op_type)
    problem = humanize(entry.problem)
    if problem and problem != head:
        head = f"{head}: {problem}" if head else problem
    return f"{head}\n{entry.title.strip()}\n{entry.text.strip()}"


def is_noop(title: str, text: str) -> bool:
    """An insight that records no optimization (the summarizer's 'No optimization found')."""
    body = f"{title}\n{text}".lower()
    return _NOOP_MARKER in body or not (title.strip() or text.strip())


def entries_to_table(entries: Sequence[MemoryEntry], vectors: np.ndarray, schema: pa.Schema) -> pa.Table:
    dim = schema.field(VECTOR_COLUMN).type.list_size
    if vectors.shape != (len(entries), dim):
        raise ValueError(f"expected vectors of shape {(len(entries), dim)}, got {vectors.shape}")
    cols: dict[str, Any] = {f: [getattr(e, f) for e in entries] for f in ENTRY_FIELDS}
    cols["noop"] = [is_noop(e.title, e.text) for e in entries]
    flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1), type=pa.float32())
    cols[VECTOR_COLUMN] = pa.FixedSizeListArray.from_arrays(flat, dim)
    arrays = [
        cols[name] if isinstance(cols[name], pa.Array) else pa.array(cols[name], type=schema.field(name).type)
        for name in schema.names
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def row_to_entry(row: dict[str, Any]) -> MemoryEntry:
    return msgspec.convert({f: row[f] for f in ENTRY_FIELDS if f in row and row[f] is not None}, MemoryEntry)


def sql_str(value: str) -> str:
    """A SQL string literal for LanceDB filters."""
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: Iterable[str]) -> str:
    vals = list(values)
    if not vals:
        return "false"
    return f"{column} IN ({', '.join(sql_str(v) for v in vals)})"
