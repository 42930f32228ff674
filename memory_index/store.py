"""`MemoryIndex`: the LanceDB table of memory entries, its writes and its retrieval.

The table is a projection of `MemoryEntryAdded` events: `upsert` is idempotent by entry id
(LanceDB merge-insert on `id`), so re-delivered events and repeated rebuilds leave one row
per id. Reads see other writers' commits immediately by default (read consistency 0 s),
which the coordinator needs when it waits for the curator to index what it just emitted.
Every method is synchronous (LanceDB's sync API); call them from asyncio through
`asyncio.to_thread`, as the curator does.
"""

from __future__ import annotations

import asyncio
import builtins
import math
import os
import random
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

from accelopt.catalog import RetrievedInsight
from accelopt.folders import private_folder
from accelopt.records import MemoryEntry
from memory_index.embedder import Embedder, canonical_model_name
from memory_index.retrieval import (
    DEFAULT_TOP_M,
    Filters,
    SearchQuery,
    blended_rank,
    collapse_near_duplicates,
    device_family,
    kernel_diff,
)
from memory_index.schema import (
    ENTRY_FIELDS,
    LIGHT_COLUMNS,
    PK_KEY,
    VECTOR_COLUMN,
    embed_text,
    entries_to_table,
    row_to_entry,
    schema_model,
    sql_in,
    table_schema,
)

DEFAULT_TABLE = "memory"
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


ENV_URI = "ACCELOPT_MEMORY"


class MemoryIndexError(RuntimeError):
    pass


def default_uri(run_root: str | Path = "runs") -> str:
    """`$ACCELOPT_MEMORY`, else `<run root>/memory` (the run config's default: one memory
    shared by every run under that root)."""
    return os.environ.get(ENV_URI) or str(Path(run_root) / "memory")


def normalize_uri(uri: str | Path) -> str:
    """Object-store URIs unchanged; local paths absolute (so equal folders compare equal)."""
    s = str(uri)
    if "://" in s and not s.startswith("file://"):
        return s.rstrip("/")
    if s.startswith("file://"):
        s = s[len("file://") :]
    return str(Path(s).expanduser().resolve())


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


_RETRIEVE_COLUMNS = [
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


class MemoryIndex:
    """One memory table. Create with `MemoryIndex.open(uri)`."""

    def __init__(
        self,
        db: Any,
        uri: str,
        table: str,
        embedder: Embedder | None,
        *,
        storage_options: dict[str, str] | None = None,
    ) -> None:
        self._db = db
        self.uri = uri
        self.table_name = table
        self._embedder = embedder
        self._storage_options = storage_options
        self._tbl: Any = None

    # --- opening ----------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        uri: str | Path | None = None,
        *,
        embedder: Embedder | str | None = None,
        table: str = DEFAULT_TABLE,
        storage_options: dict[str, str] | None = None,
        read_consistency_s: float | None = 0.0,
    ) -> MemoryIndex:
        """Connect to the memory at `uri` (a folder, or `s3://bucket/prefix`, ...).

        `embedder`: an Embedder, a model name, or None for the model the table was built
        with (the bundled all-MiniLM-L6-v2 for a new table). Opening an existing table
        with another model raises MemoryIndexError. The table itself is created on the
        first write. `read_consistency_s`: how stale reads may be (0 = always see the
        latest commit of any writer; None = never re-check, fastest).
        """
        import lancedb

        norm = normalize_uri(uri if uri is not None else default_uri())
        if "://" not in norm:  # a local memory: a folder only this user may enter
            private_folder(norm)
        kwargs: dict[str, Any] = {}
        if read_consistency_s is not None:
            kwargs["read_consistency_interval"] = timedelta(seconds=read_consistency_s)
        if storage_options:
            kwargs["storage_options"] = storage_options
        db = lancedb.connect(norm, **kwargs)
        emb = Embedder(embedder) if isinstance(embedder, str) else embedder
        index = cls(db, norm, table, emb, storage_options=storage_options)
        tbl = index._open_table()
        if tbl is not None:
            model, _ = schema_model(tbl.schema)
            if model is None:
                raise MemoryIndexError(f"table {table!r} at {norm} is not an AccelOpt memory table")
            _ensure_primary_key(tbl)
            if index._embedder is None:
                index._embedder = Embedder(model)
            elif canonical_model_name(index._embedder.name) != model:
                raise MemoryIndexError(
                    f"memory table {table!r} at {norm} was embedded with {model!r}, not "
                    f"{index._embedder.name!r}: open it with that model, or export it and import "
                    "into another URI/table to re-embed with the new one"
                )
        return index

    def _open_table(self) -> Any:
        if self._tbl is None:
            try:
                self._tbl = self._db.open_table(self.table_name)
            except (ValueError, FileNotFoundError):
                return None
        return self._tbl

    def _create_table(self) -> Any:
        tbl = self._open_table()
        if tbl is not None:
            return tbl
        schema = table_schema(self.embedder.dim, self.embedder.name)
        try:
            self._tbl = self._db.create_table(self.table_name, schema=schema, exist_ok=True)
        except Exception:  # another writer created it between our open and create
            time.sleep(0.05)
            self._tbl = self._db.open_table(self.table_name)
        return self._tbl

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = Embedder()
        return self._embedder

    @property
    def exists(self) -> bool:
        return self._open_table() is not None

    @property
    def model_name(self) -> str:
        return self.embedder.name

    def __len__(self) -> int:
        return self.count()

    def __repr__(self) -> str:
        return f"MemoryIndex({self.uri!r}, table={self.table_name!r})"

    # --- writing ----------------------------------------------------------------------------

    def upsert(self, entries: Sequence[MemoryEntry], *, skip_existing: bool = True, retries: int = 8) -> int:
        """Insert or replace entries by id; returns the number of rows written.

        Idempotent: an id already in the table is skipped (no embedding, no commit) unless
        `skip_existing=False`, in which case its row is replaced. Within one call the last
        entry of an id wins. Commit conflicts with concurrent writers are retried.
        """
        latest: dict[str, MemoryEntry] = {}
        for e in entries:
            latest[e.id] = e
        if not latest:
            return 0
        if skip_existing and self.exists:
            present = self.has_ids(latest)
            for i in present:
                del latest[i]
            if not latest:
                return 0
        todo = list(latest.values())
        vectors = self.embedder.encode([embed_text(e) for e in todo])
        tbl = self._create_table()
        data = entries_to_table(todo, vectors, tbl.schema)
        self._merge(tbl, data, retries=retries)
        return len(todo)

    def upsert_vectors(self, entries: Sequence[MemoryEntry], vectors: np.ndarray, *, retries: int = 8) -> int:
        """Write entries with precomputed embeddings (bulk loads, benchmarks). Replaces by id."""
        if not entries:
            return 0
        tbl = self._create_table()
        self._merge(tbl, entries_to_table(list(entries), vectors, tbl.schema), retries=retries)
        return len(entries)

    def _merge(self, tbl: Any, data: pa.Table, *, retries: int) -> None:
        delay = 0.02
        for attempt in range(retries + 1):
            try:
                (tbl.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(data))
                return
            except Exception as e:  # a commit conflict with another writer: back off, retry
                msg = str(e).lower()
                if attempt == retries or not any(w in msg for w in ("conflict", "retry", "commit")):
                    raise
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 1.0)

    def delete(self, ids: Iterable[str]) -> None:
        tbl = self._open_table()
        ids = list(ids)
        if tbl is not None and ids:
            tbl.delete(sql_in("id", ids))

    def drop(self) -> None:
        """Delete the whole table (the memory at this URI is empty afterwards)."""
        self._db.drop_table(self.table_name, ignore_missing=True)
        self._tbl = None

    # --- reading ----------------------------------------------------------------------------

    def count(self, filters: Filters | None = None) -> int:
        tbl = self._open_table()
        if tbl is None:
            return 0
        where = filters.where() if filters else None
        return int(tbl.count_rows(where) if where else tbl.count_rows())

    def has_ids(self, ids: Iterable[str]) -> set[str]:
        """Which of `ids` are in the table (the coordinator waits on this after emitting)."""
        wanted = list(dict.fromkeys(ids))
        tbl = self._open_table()
        if tbl is None or not wanted:
            return set()
        found: set[str] = set()
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            got = tbl.search().where(sql_in("id", chunk)).select(["id"]).limit(len(chunk)).to_arrow()
            found.update(got.column("id").to_pylist())
        return found

    async def wait_for_ids(
        self, ids: Iterable[str], *, timeout_s: float = 30.0, poll_s: float = 0.1
    ) -> set[str]:
        """Wait until every id is indexed or `timeout_s` passed; returns the ids that are
        indexed (like `has_ids`: all of them unless it timed out)."""
        wanted = set(ids)
        found: set[str] = set()
        deadline = time.monotonic() + timeout_s
        while True:
            found |= await asyncio.to_thread(self.has_ids, wanted - found)
            if found >= wanted or time.monotonic() >= deadline:
                return found
            await asyncio.sleep(poll_s)

    def get(self, entry_id: str) -> MemoryEntry | None:
        return self.get_many([entry_id]).get(entry_id)

    def get_many(self, ids: Sequence[str]) -> dict[str, MemoryEntry]:
        """The entries of `ids` that are here, by id, in one query (a search's hits)."""
        tbl = self._open_table()
        if tbl is None or not ids:
            return {}
        wanted = sorted(set(ids))
        rows = (
            tbl.search().where(sql_in("id", wanted)).select(list(ENTRY_FIELDS)).limit(len(wanted)).to_list()
        )
        return {r["id"]: row_to_entry(r) for r in rows}

    def list(
        self,
        filters: Filters | None = None,
        *,
        limit: int | None = 50,
        offset: int = 0,
        kernels: bool = False,
        newest_first: bool = True,
    ) -> list[MemoryEntry]:
        """Entries ordered by created_at. Without `kernels`, slow/fast kernel are ""."""
        tbl = self._open_table()
        if tbl is None:
            return []
        where = (filters or Filters(include_noop=True)).where()
        cols = list(ENTRY_FIELDS if kernels else LIGHT_COLUMNS)
        q = tbl.search().select(["id", "created_at"]).limit(None)
        if where:
            q = q.where(where)
        keys = q.to_arrow()
        order = sorted(
            zip(keys.column("created_at").to_pylist(), keys.column("id").to_pylist(), strict=True),
            reverse=newest_first,
        )
        page = order[offset : offset + limit if limit is not None else None]
        if not page:
            return []
        ids = [i for _, i in page]
        rows = tbl.search().where(sql_in("id", ids)).select(cols).limit(len(ids)).to_list()
        by_id = {r["id"]: r for r in rows}
        out = []
        for i in ids:
            r = by_id[i]
            if not kernels:
                r = {**r, "slow_kernel": "", "fast_kernel": ""}
            out.append(row_to_entry(r))
        return out

    def iter_entries(self, filters: Filters | None = None, *, batch: int = 1000) -> Iterator[MemoryEntry]:
        """Every entry with its kernels (for export), in no particular order."""
        tbl = self._open_table()
        if tbl is None:
            return
        where = (filters or Filters(include_noop=True)).where()
        q = tbl.search().select(list(ENTRY_FIELDS)).limit(None)
        if where:
            q = q.where(where)
        for rb in q.to_batches(batch):
            for row in rb.to_pylist():
                yield row_to_entry(row)

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored embedding of each id (for tests and diagnostics)."""
        tbl = self._open_table()
        if tbl is None or not ids:
            return {}
        got = tbl.search().where(sql_in("id", ids)).select(["id", VECTOR_COLUMN]).limit(len(ids)).to_arrow()
        vecs = got.column(VECTOR_COLUMN).to_pylist()
        return {
            i: np.asarray(v, dtype=np.float32)
            for i, v in zip(got.column("id").to_pylist(), vecs, strict=True)
        }

    # --- retrieval --------------------------------------------------------------------------

    def search(
        self, query: str | np.ndarray | Sequence[float], q: SearchQuery | None = None
    ) -> builtins.list[RetrievedInsight]:  # `list` in this class is the method
        """The `q.top_m` best entries for `query` (text, or a unit vector), as `q` asks.

        `q`'s filters restrict the candidates before ranking (prefilter); no-op insights are
        never returned. The nearest candidates by cosine similarity are ranked by
        `blended_rank` (with both weights 0: similarity alone), then near-duplicates are
        collapsed where `q.collapse` (see `SearchQuery`). `score` is the cosine similarity to
        the query; `diff` the slow -> fast change (`kernel_diff`).
        """
        q = q or SearchQuery()
        if q.top_m <= 0:
            return []
        tbl = self._open_table()
        if tbl is None:
            return []
        res = self._nearest(tbl, self._vector(query), q)
        if res.num_rows == 0:
            return []
        cols = {name: res.column(name).to_pylist() for name in _RETRIEVE_COLUMNS if name != VECTOR_COLUMN}
        sims = [1.0 - float(d) for d in res.column("_distance").to_pylist()]
        keep = self._keep(res, cols, self._rank(cols, sims, q), q)
        return [_insight(cols, i, sims[i]) for i in keep]

    def _vector(self, query: str | np.ndarray | Sequence[float]) -> np.ndarray:
        """The query as a vector: a text embedded with this memory's model."""
        if isinstance(query, str):
            return self.embedder.encode([query])[0]
        return np.asarray(query, dtype=np.float32)

    @staticmethod
    def _nearest(tbl: Any, vec: np.ndarray, q: SearchQuery) -> pa.Table:
        """The `q.fetch` nearest entries that pass `q`'s filters, with their distances."""
        search = (
            tbl.search(vec, vector_column_name=VECTOR_COLUMN)
            .distance_type("cosine")
            .select(_RETRIEVE_COLUMNS)
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

    @staticmethod
    def _rank(
        cols: dict[str, builtins.list[Any]], sims: builtins.list[float], q: SearchQuery
    ) -> builtins.list[int]:
        """The candidates' order: by similarity, or by `blended_rank` where `q` blends."""
        if not q.blended:
            return builtins.list(range(len(sims)))
        return blended_rank(
            sims,
            [float(x) for x in cols["speedup"]],
            [float(x) for x in cols["created_at"]],
            speedup_weight=q.speedup_weight,
            recency_weight=q.recency_weight,
        )

    @staticmethod
    def _keep(
        res: pa.Table, cols: dict[str, builtins.list[Any]], order: builtins.list[int], q: SearchQuery
    ) -> builtins.list[int]:
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

    def retrieve(
        self,
        query: str | np.ndarray | Sequence[float],
        *,
        device: str,
        language: str,
        op_type: str,
        top_m: int = DEFAULT_TOP_M,
        cross_device_share: float = 0.0,
        same_device_only: bool = False,
        exclude_source_runs: Sequence[str] | None = None,
        allow_ids: Sequence[str] | None = None,
        speedup_weight: float = 0.0,
        recency_weight: float = 0.0,
    ) -> builtins.list[RetrievedInsight]:  # `list` in this class is the method
        """A planner's insights, as `planner_sees` rules: `top_m` slots from the same kernel
        language and device family (`device_family`; only `device` itself with
        `same_device_only`), of which a share of `cross_device_share` (rounded, at least 1 when
        > 0) is given to the best insights of other chips (another language or family) about
        the same operator, `op_type` (slots they do not fill stay with the own chip's). Each
        part ranked as `search` ranks."""
        if top_m <= 0:
            return []
        vec = self._vector(query)
        cross = (
            0 if same_device_only or cross_device_share <= 0 else max(1, round(top_m * cross_device_share))
        )
        cross = min(cross, top_m)
        base = SearchQuery(
            exclude_source_runs=exclude_source_runs,
            allow_ids=allow_ids,
            speedup_weight=speedup_weight,
            recency_weight=recency_weight,
        )
        others = (
            self.search(
                vec,
                msgspec.structs.replace(
                    base, top_m=cross, op_type=op_type, other_chip_than=(language, device_family(device))
                ),
            )
            if cross
            else []
        )
        # slots another chip does not fill stay the planner's own chip's
        family = [device] if same_device_only else builtins.list(device_family(device))
        own = (
            self.search(
                vec,
                msgspec.structs.replace(base, top_m=top_m - len(others), device=family, language=language),
            )
            if top_m > len(others)
            else []
        )
        return own + others

    # --- maintenance ------------------------------------------------------------------------

    def stats(self) -> MemoryStats:
        tbl = self._open_table()
        if tbl is None:
            return MemoryStats(uri=self.uri, table=self.table_name, exists=False)
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
            uri=self.uri,
            table=self.table_name,
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
        self,
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
        tbl = self._open_table()
        if tbl is None:
            return False
        rows = tbl.count_rows()
        self.create_scalar_indices()
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
        self, *, ann_min_rows: int = ANN_MIN_ROWS, index_type: str = DEFAULT_INDEX_TYPE
    ) -> dict[str, Any]:
        """What a long-lived writer runs now and then: build the scalar indices once the
        table has rows and the vector index once it is large enough, then compact and fold
        new rows into the indices. Returns what it did."""
        tbl = self._open_table()
        if tbl is None:
            return {}
        rows = tbl.count_rows()
        indexed = {c for ix in tbl.list_indices() for c in _index_columns(ix)}
        done: dict[str, Any] = {"rows": rows, "vector_index_built": False, "scalar_indices_built": False}
        if rows >= ann_min_rows and VECTOR_COLUMN not in indexed:
            done["vector_index_built"] = self.create_vector_index(
                index_type=index_type, min_rows=ann_min_rows
            )
            done["scalar_indices_built"] = True
        elif rows > 0 and not set(SCALAR_INDICES) <= indexed:
            self.create_scalar_indices()
            done["scalar_indices_built"] = True
        self.optimize()
        return done

    def create_scalar_indices(self) -> None:
        """BTREE on `id` (has_ids, get, merge-insert) and BITMAP on the filter columns (the
        prefilter of every search: at 100k rows it halves retrieval latency)."""
        tbl = self._open_table()
        if tbl is None or tbl.count_rows() == 0:
            return
        from lancedb.index import Bitmap, BTree

        for column, kind in SCALAR_INDICES.items():
            tbl.create_index(column, config=BTree() if kind == "btree" else Bitmap(), replace=True)

    def has_vector_index(self) -> bool:
        tbl = self._open_table()
        return tbl is not None and any(VECTOR_COLUMN in _index_columns(ix) for ix in tbl.list_indices())

    def optimize(self, *, cleanup_older_than_s: float | None = None) -> None:
        """Compact small fragments (one per commit) and fold new rows into the indices."""
        tbl = self._open_table()
        if tbl is None:
            return
        kwargs: dict[str, Any] = {}
        if cleanup_older_than_s is not None:
            kwargs["cleanup_older_than"] = timedelta(seconds=cleanup_older_than_s)
        tbl.optimize(**kwargs)


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


def _ensure_primary_key(tbl: Any) -> None:
    """Mark `id` as the primary key on tables made before it was part of the schema."""
    if PK_KEY not in (tbl.schema.field("id").metadata or {}):
        try:
            tbl.set_unenforced_primary_key("id")
        except Exception:  # read-only store or a racing writer: the next open retries
            pass


def _index_name(ix: Any) -> str:
    name = getattr(ix, "name", None) or str(ix)
    kind = getattr(ix, "index_type", None)
    return f"{name} ({kind})" if kind else name


def _index_columns(ix: Any) -> list[str]:
    cols = getattr(ix, "columns", None)
    return list(cols) if cols else [str(ix)]
