"""One search of a memory table (`MemoryIndex.search`, which composes this): the nearest
entries by cosine similarity among those that pass the query's filters (prefilter), ranked by
similarity or `blended_rank`, near-duplicates collapsed where asked, each row as the insight a
planner receives."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from accelopt.catalog import RetrievedInsight
from memory_index.retrieval import SearchQuery, blended_rank, collapse_near_duplicates, kernel_diff
from memory_index.schema import VECTOR_COLUMN

RETRIEVE_COLUMNS = [
    "id",
    "problem",
    "device",
    "language",
    "speedup",
    "title",
    "text",
    "created_at",
    "slow_kernel",
    "fast_kernel",
    VECTOR_COLUMN,
]


def search_table(tbl: Any, vec: np.ndarray, q: SearchQuery) -> list[RetrievedInsight]:
    """The `q.top_m` best entries of LanceDB table `tbl` for the unit vector `vec`, as `q` asks."""
    res = _nearest(tbl, vec, q)
    if res.num_rows == 0:
        return []
    cols = {name: res.column(name).to_pylist() for name in RETRIEVE_COLUMNS if name != VECTOR_COLUMN}
    sims = [1.0 - float(d) for d in res.column("_distance").to_pylist()]
    keep = _keep(res, cols, _rank(cols, sims, q), q)
    return [_insight(cols, i, sims[i]) for i in keep]


def _nearest(tbl: Any, vec: np.ndarray, q: SearchQuery) -> pa.Table:
    """The `q.fetch` nearest entries that pass `q`'s filters, with their distances."""
    search = (
        tbl.search(vec, vector_column_name=VECTOR_COLUMN)
        .distance_type("cosine")
        .select(RETRIEVE_COLUMNS)
        .limit(q.fetch)
    )
    where = q.filters().where()
    if where:
        search = search.where(where, prefilter=True)
    if q.nprobes is not None:
        search = search.nprobes(q.nprobes)
    if q.refine_factor is not None:
        search = search.refine_factor(q.refine_factor)
    return search.to_arrow()


def _rank(cols: dict[str, list[Any]], sims: list[float], q: SearchQuery) -> list[int]:
    """The candidates' order: by similarity, or by `blended_rank` where `q` blends."""
    if not q.blended:
        return list(range(len(sims)))
    return blended_rank(
        sims,
        [float(x) for x in cols["speedup"]],
        [float(x) for x in cols["created_at"]],
        speedup_weight=q.speedup_weight,
        recency_weight=q.recency_weight,
    )


def _keep(res: pa.Table, cols: dict[str, list[Any]], order: list[int], q: SearchQuery) -> list[int]:
    """The first `q.top_m` of `order`, near-duplicates collapsed to the best-ranked one
    where `q.collapse`."""
    if not q.collapse:
        return order[: q.top_m]
    flat = res.column(VECTOR_COLUMN).combine_chunks().values.to_numpy(zero_copy_only=False)
    vecs = flat.reshape(res.num_rows, -1)[order]
    kept = collapse_near_duplicates(
        [cols["title"][i] for i in order], vecs, threshold=q.duplicate_cosine, limit=q.top_m
    )
    return [order[k] for k in kept]


def _insight(cols: dict[str, list[Any]], i: int, sim: float) -> RetrievedInsight:
    """Row `i` of a search's columns as the insight a planner receives."""
    return RetrievedInsight(
        entry_id=cols["id"][i],
        problem=cols["problem"][i],
        device=cols["device"][i],
        language=cols["language"][i],
        speedup=float(cols["speedup"][i]),
        title=cols["title"][i],
        text=cols["text"][i],
        score=round(sim, 6),
        diff=kernel_diff(cols["slow_kernel"][i] or "", cols["fast_kernel"][i] or ""),
    )
