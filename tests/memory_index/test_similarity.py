"""Real embeddings: a related insight outranks unrelated ones, across devices and languages."""

from __future__ import annotations

from memory_index import SearchQuery, query_for


def test_related_insight_ranks_first_across_devices(memory, corpus, make_entry):
    related = make_entry(
        "**Fuse the RMS normalization into the matmul row loop**",
        "Compute each row's inverse RMS once and scale the A tile while loading it into the matmul "
        "inner loop, so the normalized activations never make a round trip through memory.",
        problem="rmsnorm_matmul",
        device="cpu",
        language="c",
        speedup=1.8,
    )
    memory.upsert([*corpus, related])

    query = query_for(
        "add_rmsnorm_matmul",
        "add_rmsnorm_matmul",
        "trn1",
        "nki",
        "Plan: fuse the residual add and the RMS norm into the matmul kernel.",
    )
    results = memory.search(query, SearchQuery(top_m=5))

    assert results[0].entry_id == related.id
    assert results[0].device == "cpu" and results[0].language == "c" and results[0].speedup == 1.8
    assert results[0].score > results[1].score + 0.1
    assert all(-1.0 <= r.score <= 1.0 for r in results)


def test_scores_are_sorted_and_top_m_respected(memory, corpus):
    memory.upsert(corpus)
    results = memory.search("parallel prefix sum scan with OpenMP blocks", SearchQuery(top_m=3))
    assert len(results) == 3
    assert results[0].problem == "cumsum"
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)


def test_empty_or_missing_memory_returns_nothing(memory):
    assert memory.search("anything") == []
    assert memory.has_ids(["x"]) == set()
    assert memory.get("x") is None
    assert memory.stats().exists is False
