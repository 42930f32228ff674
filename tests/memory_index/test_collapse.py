"""Near-duplicate insights are collapsed to the best-ranked one."""

from __future__ import annotations

import numpy as np

from memory_index import SearchQuery, collapse_near_duplicates


def test_collapse_by_title_and_by_cosine():
    v = np.eye(4, dtype=np.float32)
    near = np.array([0.99, 0.141, 0, 0], dtype=np.float32)
    near /= np.linalg.norm(near)
    vecs = np.stack([v[0], near, v[1], v[2], v[3]])
    titles = ["**Tile the loop**", "something else", "Tile the LOOP!", "distinct", "other"]
    assert collapse_near_duplicates(titles, vecs) == [0, 3, 4]
    assert collapse_near_duplicates(titles, vecs, limit=2) == [0, 3]


def test_search_collapses_repeated_insights_and_still_fills_top_m(memory, corpus, make_entry):
    title = "**Fuse the RMS normalization into the matmul row loop**"
    text = "Compute each row's inverse RMS once and scale the tile while loading it into the matmul."
    copies = [make_entry(title, text, problem="rmsnorm_matmul", source_run=f"run-{i}") for i in range(5)]
    paraphrase = make_entry(
        "**Fuse RMS normalization into the matmul row loop.**",
        text,
        problem="rmsnorm_matmul",
        source_run="run-x",
    )
    memory.upsert([*copies, paraphrase, *corpus])

    results = memory.search("rmsnorm matmul fusion", SearchQuery(top_m=4))
    assert len(results) == 4
    assert sum(r.entry_id in {c.id for c in [*copies, paraphrase]} for r in results) == 1

    raw = memory.search("rmsnorm matmul fusion", SearchQuery(top_m=4, collapse=False))
    assert all(r.entry_id in {c.id for c in [*copies, paraphrase]} for r in raw)
