"""`MemoryIndex`: the LanceDB table of memory entries, its writes and its retrieval (one search
of the table: memory_index/nearest.py; its stats, indices and compaction: memory_index/upkeep.py).

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
import os
import random
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import memory_index.upkeep as upkeep
from accelopt.catalog import RetrievedInsight
from accelopt.folders import private_folder
from accelopt.records import MemoryEntry
from memory_index.embedder import Embedder, canonical_model_name
from memory_index.nearest import search_table
from memory_index.retrieval import DEFAULT_TOP_M, Filters, SearchQuery, planner_insights
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
from memory_index.upkeep import ANN_MIN_ROWS, DEFAULT_INDEX_TYPE, MemoryStats

DEFAULT_TABLE = "memory"
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
        return search_table(tbl, self._vector(query), q)

    def _vector(self, query: str | np.ndarray | Sequence[float]) -> np.ndarray:
        """The query as a vector: a text embedded with this memory's model."""
        if isinstance(query, str):
            return self.embedder.encode([query])[0]
        return np.asarray(query, dtype=np.float32)

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
        """A planner's insights (`planner_insights`: its own chip's and, with
        `cross_device_share`, other chips' of its operator), each part ranked as `search` ranks."""
        if top_m <= 0:
            return []
        vec = self._vector(query)
        base = SearchQuery(
            exclude_source_runs=exclude_source_runs,
            allow_ids=allow_ids,
            speedup_weight=speedup_weight,
            recency_weight=recency_weight,
        )
        return planner_insights(
            lambda q: self.search(vec, q),
            base,
            device=device,
            language=language,
            op_type=op_type,
            top_m=top_m,
            cross_device_share=cross_device_share,
            same_device_only=same_device_only,
        )

    # --- upkeep (memory_index/upkeep.py) -----------------------------------------------------

    def stats(self) -> MemoryStats:
        return upkeep.stats(self._open_table(), self.uri, self.table_name)

    def create_vector_index(
        self,
        *,
        index_type: str = DEFAULT_INDEX_TYPE,
        num_partitions: int | None = None,
        num_sub_vectors: int | None = None,
        min_rows: int = ANN_MIN_ROWS,
    ) -> bool:
        """An ANN index on the embeddings once `min_rows` rows are here, and the scalar
        indices (`upkeep.create_vector_index`)."""
        return upkeep.create_vector_index(
            self._open_table(),
            index_type=index_type,
            num_partitions=num_partitions,
            num_sub_vectors=num_sub_vectors,
            min_rows=min_rows,
        )

    def maintain(
        self, *, ann_min_rows: int = ANN_MIN_ROWS, index_type: str = DEFAULT_INDEX_TYPE
    ) -> dict[str, Any]:
        """A long-lived writer's now and then: indices as the table grows, compaction."""
        return upkeep.maintain(self._open_table(), ann_min_rows=ann_min_rows, index_type=index_type)

    def create_scalar_indices(self) -> None:
        upkeep.create_scalar_indices(self._open_table())

    def has_vector_index(self) -> bool:
        return upkeep.has_vector_index(self._open_table())

    def optimize(self, *, cleanup_older_than_s: float | None = None) -> None:
        """Compact small fragments (one per commit) and fold new rows into the indices."""
        upkeep.optimize(self._open_table(), cleanup_older_than_s=cleanup_older_than_s)


def _ensure_primary_key(tbl: Any) -> None:
    """Mark `id` as the primary key on tables made before it was part of the schema."""
    if PK_KEY not in (tbl.schema.field("id").metadata or {}):
        try:
            tbl.set_unenforced_primary_key("id")
        except Exception:  # read-only store or a racing writer: the next open retries
            pass
