"""Upserts are idempotent by entry id: re-delivery writes nothing twice."""

from __future__ import annotations

import msgspec


def test_upsert_twice_keeps_one_row_per_id(memory, corpus):
    assert memory.upsert(corpus) == len(corpus)
    version = memory.stats().version
    assert memory.upsert(corpus) == 0  # already indexed: no embedding, no commit
    assert memory.stats().version == version
    assert memory.count() == len(corpus)
    assert memory.has_ids([e.id for e in corpus] + ["absent"]) == {e.id for e in corpus}


def test_duplicates_within_one_batch_and_replacement(memory, make_entry):
    a = make_entry("**First**", "first text", id="same")
    b = msgspec.structs.replace(a, title="**Second**", text="second text")
    assert memory.upsert([a, b]) == 1
    assert memory.count() == 1
    assert memory.get("same").title == "**Second**"  # last one in a batch wins

    c = msgspec.structs.replace(a, title="**Third**")
    assert memory.upsert([c]) == 0  # skip_existing: the stored row stays
    assert memory.upsert([c], skip_existing=False) == 1
    assert memory.count() == 1
    assert memory.get("same") == c


def test_get_round_trips_every_field(memory, make_entry):
    e = make_entry(
        "**Title**", "Body with 'quotes' and\nnewlines", problem="p'q", speedup=2.5, positive=False
    )
    memory.upsert([e])
    assert memory.get(e.id) == e
