"""A memory table's upkeep (`MemoryIndex.stats`, `maintain` and the index builders, which
call these with the table, None where it does not exist yet): what the table holds, the
scalar indices on the filter columns, the vector index once the table is large enough, and
compaction. What is stored and retrieved is not changed here."""

from __future__ import annotations

import math
from collections import Counter
from datetime import timedelta
from typing import Any

import msgspec

from memory_index.schema import VECTOR_COLUMN, schema_model

ANN_MIN_ROWS = 5000
"""Below this many rows a vector index is not worth building (a flat scan is a few ms)."""
SCALAR_INDICES = {
    "id": "btree",
    "noop": "bitmap",
    "device": "bitmap",
    "language": "bitmap",
    "op_type": "bitmap",
    "problem": "bitmap",
}
DEFAULT_INDEX_TYPE = "IVF_HNSW_SQ"
"""Measured at 100k rows (benchmarks/memory_bench.py): builds 3x faster than IVF_PQ and has
~0.98 recall@16 without a refine step."""


class MemoryStats(msgspec.Struct, kw_only=True):
    uri: str
    table: str
    exists: bool
    rows: int = 0
    noop_rows: int = 0
    model: str | None = None
    dim: int | None = None
    version: int | None = None
    fragments: int = 0
    indices: list[str] = []
    runs: int = 0
    problems: int = 0
    by_device: dict[str, int] = {}
    by_language: dict[str, int] = {}
    by_op_type: dict[str, int] = {}


def stats(tbl: Any | None, uri: str, table: str) -> MemoryStats:
    """What table `table` at `uri` holds: rows by device, language and operator, runs,
    problems, its embedding model, version, fragments and indices."""
    if tbl is None:
        return MemoryStats(uri=uri, table=table, exists=False)
    model, dim = schema_model(tbl.schema)
    meta = (
        tbl.search()
        .select(["source_run", "problem", "device", "language", "op_type", "noop"])
        .limit(None)
        .to_arrow()
    )
    col = {name: meta.column(name).to_pylist() for name in meta.column_names}
    try:
        fragments = int(tbl.stats()["fragment_stats"]["num_fragments"])
    except Exception:
        fragments = 0
    return MemoryStats(
        uri=uri,
        table=table,
        exists=True,
        rows=meta.num_rows,
        noop_rows=sum(1 for x in col["noop"] if x),
        model=model,
        dim=dim,
        version=int(tbl.version),
        fragments=fragments,
        indices=[_index_name(ix) for ix in tbl.list_indices()],
        runs=len(set(col["source_run"])),
        problems=len(set(col["problem"])),
        by_device=dict(Counter(col["device"]).most_common()),
        by_language=dict(Counter(col["language"]).most_common()),
        by_op_type=dict(Counter(col["op_type"]).most_common()),
    )


def create_vector_index(
    tbl: Any | None,
    *,
    index_type: str = DEFAULT_INDEX_TYPE,
    num_partitions: int | None = None,
    num_sub_vectors: int | None = None,
    min_rows: int = ANN_MIN_ROWS,
) -> bool:
    """Build an ANN index on the embeddings (cosine), and the scalar indices.

    Returns False (building only the scalar indices) below `min_rows`: a flat scan is
    exact and fast there. Rows added later are searched flat until `optimize()` folds
    them in.
    """
    if tbl is None:
        return False
    rows = tbl.count_rows()
    create_scalar_indices(tbl)
    if rows < min_rows:
        return False
    tbl.create_index(
        VECTOR_COLUMN,
        config=_vector_index_config(
            index_type,
            tbl.schema.field(VECTOR_COLUMN).type.list_size,
            num_partitions or max(1, int(math.sqrt(rows))),
            num_sub_vectors,
        ),
    )
    return True


def maintain(
    tbl: Any | None, *, ann_min_rows: int = ANN_MIN_ROWS, index_type: str = DEFAULT_INDEX_TYPE
) -> dict[str, Any]:
    """What a long-lived writer runs now and then: build the scalar indices once the
    table has rows and the vector index once it is large enough, then compact and fold
    new rows into the indices. Returns what it did."""
    if tbl is None:
        return {}
    rows = tbl.count_rows()
    indexed = {c for ix in tbl.list_indices() for c in _index_columns(ix)}
    done: dict[str, Any] = {"rows": rows, "vector_index_built": False, "scalar_indices_built": False}
    if rows >= ann_min_rows and VECTOR_COLUMN not in indexed:
        done["vector_index_built"] = create_vector_index(tbl, index_type=index_type, min_rows=ann_min_rows)
        done["scalar_indices_built"] = True
    elif rows > 0 and not set(SCALAR_INDICES) <= indexed:
        create_scalar_indices(tbl)
        done["scalar_indices_built"] = True
    optimize(tbl)
    return done


def create_scalar_indices(tbl: Any | None) -> None:
    """BTREE on `id` (has_ids, get, merge-insert) and BITMAP on the filter columns (the
    prefilter of every search: at 100k rows it halves retrieval latency)."""
    if tbl is None or tbl.count_rows() == 0:
        return
    from lancedb.index import Bitmap, BTree

    for column, kind in SCALAR_INDICES.items():
        tbl.create_index(column, config=BTree() if kind == "btree" else Bitmap(), replace=True)


def has_vector_index(tbl: Any | None) -> bool:
    return tbl is not None and any(VECTOR_COLUMN in _index_columns(ix) for ix in tbl.list_indices())


def optimize(tbl: Any | None, *, cleanup_older_than_s: float | None = None) -> None:
    """Compact small fragments (one per commit) and fold new rows into the indices."""
    if tbl is None:
        return
    kwargs: dict[str, Any] = {}
    if cleanup_older_than_s is not None:
        kwargs["cleanup_older_than"] = timedelta(seconds=cleanup_older_than_s)
    tbl.optimize(**kwargs)


def _vector_index_config(index_type: str, dim: int, num_partitions: int, num_sub_vectors: int | None) -> Any:
    from lancedb import index as ix

    kind = index_type.upper()
    sub = num_sub_vectors or (dim // 16 if dim % 16 == 0 else dim // 8)
    if kind == "IVF_PQ":
        return ix.IvfPq(distance_type="cosine", num_partitions=num_partitions, num_sub_vectors=sub)
    if kind == "IVF_HNSW_PQ":
        return ix.HnswPq(distance_type="cosine", num_partitions=num_partitions, num_sub_vectors=sub)
    simple = {"IVF_FLAT": ix.IvfFlat, "IVF_SQ": ix.IvfSq, "IVF_HNSW_SQ": ix.HnswSq, "IVF_RQ": ix.IvfRq}
    if kind not in simple:
        raise ValueError(
            f"unknown vector index type {index_type!r}: use one of IVF_PQ, IVF_HNSW_PQ, " + ", ".join(simple)
        )
    return simple[kind](distance_type="cosine", num_partitions=num_partitions)


def _index_name(ix: Any) -> str:
    name = getattr(ix, "name", None) or str(ix)
    kind = getattr(ix, "index_type", None)
    return f"{name} ({kind})" if kind else name


def _index_columns(ix: Any) -> list[str]:
    cols = getattr(ix, "columns", None)
    return list(cols) if cols else [str(ix)]
