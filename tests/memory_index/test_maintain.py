"""Maintenance builds the vector and id indices once the table is large enough; search agrees."""

from __future__ import annotations

import numpy as np

from memory_index import SearchQuery


def test_maintain_builds_indices_and_search_still_finds_the_nearest(memory, make_entry):
    rng = np.random.default_rng(0)
    entries = [
        make_entry(f"**Insight {i}**", f"text {i}", problem=f"p{i % 5}", device=("cpu", "trn1")[i % 2])
        for i in range(400)
    ]
    vecs = rng.standard_normal((400, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    memory.upsert_vectors(entries[:100], vecs[:100])
    assert memory.maintain(ann_min_rows=300) == {
        "rows": 100,
        "vector_index_built": False,
        "scalar_indices_built": True,
    }
    assert memory.maintain(ann_min_rows=300)["scalar_indices_built"] is False  # already there
    assert not memory.has_vector_index()

    memory.upsert_vectors(entries[100:], vecs[100:])
    assert memory.maintain(ann_min_rows=300)["vector_index_built"] is True
    assert memory.has_vector_index()
    assert any("embedding" in name for name in memory.stats().indices)

    late = make_entry("**Late**", "added after the index", device="trn1")
    late_vec = rng.standard_normal(384).astype(np.float32)
    memory.upsert_vectors([late], (late_vec / np.linalg.norm(late_vec))[None, :])  # unindexed until maintain
    for k in (3, 250, 399):
        assert memory.search(vecs[k], SearchQuery(top_m=4))[0].entry_id == entries[k].id
    assert memory.search(late_vec, SearchQuery(top_m=1, device="trn1"))[0].entry_id == late.id
    assert memory.maintain(ann_min_rows=300)["vector_index_built"] is False  # already there: folded in
    assert memory.search(late_vec, SearchQuery(top_m=1))[0].entry_id == late.id
    assert memory.has_ids([late.id, entries[0].id]) == {late.id, entries[0].id}
    assert {r.device for r in memory.search(vecs[0], SearchQuery(top_m=20, device="cpu"))} == {"cpu"}
    assert len(memory.stats().indices) == 7  # embedding + id + 5 filter columns
