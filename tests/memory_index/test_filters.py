"""Filters (device, language, op type, minimum speedup, excluded problem) and no-op exclusion."""

from __future__ import annotations

from memory_index import Filters, SearchQuery


def _ids(results):
    return {r.entry_id for r in results}


def test_filters_restrict_candidates(memory, corpus, make_entry):
    fast = make_entry(
        "**Unroll the reduction by 8**",
        "Unroll the inner reduction loop.",
        problem="rowsum",
        op_type="reduction",
        device="cpu",
        language="c",
        speedup=3.0,
    )
    memory.upsert([*corpus, fast])
    q = "make this kernel faster"

    by_device = memory.search(q, SearchQuery(device="trn1"))
    assert by_device and all(r.device == "trn1" for r in by_device)
    assert len(by_device) == sum(1 for e in corpus if e.device == "trn1")

    both = memory.search(q, SearchQuery(device=["trn1", "h100"]))
    assert {r.device for r in both} == {"trn1", "h100"}

    by_lang = memory.search(q, SearchQuery(language="triton"))
    assert by_lang and all(r.language == "triton" for r in by_lang)

    by_op = memory.search(q, SearchQuery(op_type="reduction"))
    assert _ids(by_op) == {e.id for e in [*corpus, fast] if e.op_type == "reduction"}

    assert _ids(memory.search(q, SearchQuery(min_speedup=2.0))) == {fast.id}
    assert fast.id not in _ids(memory.search(q, SearchQuery(exclude_problem="rowsum")))
    assert memory.search(q, SearchQuery(device="cpu", language="nki")) == []
    assert memory.count(Filters(device="cpu", min_speedup=2.0)) == 1


def test_noop_insights_are_never_retrieved(memory, make_entry):
    noop = make_entry("**No optimization found**", "No optimization found", problem="softmax")
    noop2 = make_entry(
        "**Same kernel**", "The kernels are identical. No optimization found.", problem="softmax"
    )
    real = make_entry("**Vectorize softmax**", "Use SIMD for exp.", problem="softmax")
    memory.upsert([noop, noop2, real])
    assert _ids(memory.search("softmax no optimization found", SearchQuery(top_m=10))) == {real.id}
    assert memory.stats().noop_rows == 2
    assert memory.get(noop.id) == noop  # kept in the table, only hidden from retrieval


def test_quotes_in_filter_values_are_escaped(memory, make_entry):
    e = make_entry("**Odd name**", "text", problem="it's_odd", device="dev'x")
    memory.upsert([e])
    assert _ids(memory.search("odd", SearchQuery(device="dev'x"))) == {e.id}
    assert memory.search("odd", SearchQuery(exclude_problem="it's_odd")) == []
