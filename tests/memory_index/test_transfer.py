"""JSONL export and import round-trip every field; a table keeps its embedding model."""

from __future__ import annotations

import pytest

from memory_index import Filters, MemoryIndex, MemoryIndexError, SearchQuery, export_jsonl, import_jsonl


def test_export_import_round_trip(memory, tmp_path, corpus, embedder):
    memory.upsert(corpus)
    path = tmp_path / "memory.jsonl"
    assert export_jsonl(memory, path) == len(corpus)
    assert len(path.read_text().splitlines()) == len(corpus)
    assert export_jsonl(memory, tmp_path / "trn1.jsonl", Filters(device="trn1")) == 2

    other = MemoryIndex.open(tmp_path / "other", embedder=embedder)
    assert import_jsonl(other, path) == len(corpus)
    assert import_jsonl(other, path) == 0
    assert sorted(other.iter_entries(), key=lambda e: e.id) == sorted(corpus, key=lambda e: e.id)
    assert [r.entry_id for r in other.search("prefix sum", SearchQuery(top_m=2))] == [
        r.entry_id for r in memory.search("prefix sum", SearchQuery(top_m=2))
    ]


def test_opening_with_another_model_is_refused(memory, corpus, memory_uri):
    memory.upsert(corpus[:1])
    reopened = MemoryIndex.open(memory_uri)  # no model given: the one the table was built with
    assert reopened.model_name == memory.model_name
    with pytest.raises(MemoryIndexError, match="embedded with"):
        MemoryIndex.open(memory_uri, embedder="sentence-transformers/all-mpnet-base-v2")
    with pytest.raises(MemoryIndexError, match="not an AccelOpt memory table"):
        import lancedb
        import pyarrow as pa

        lancedb.connect(memory_uri).create_table("foreign", schema=pa.schema([pa.field("x", pa.int32())]))
        MemoryIndex.open(memory_uri, table="foreign")
