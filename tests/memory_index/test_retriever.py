"""The memory retriever answers a run's MemoryRequested on the log (real NATS, real LanceDB,
the real bundled embedding model): it retrieves with the run's settings, never from the
run's own future, says when its entries are not indexed, and serves an ablation its
parent's recorded retrieval only while the memory settings are the parent's."""

from __future__ import annotations

import asyncio
import time

import msgspec

from accelopt import catalog as c
from accelopt.config import MemoryConfig
from actors.roles.retriever import MemoryRetriever
from events.log import EventLog


def _started(run_id: str, memory: MemoryConfig, parent: str | None = None) -> c.RunStarted:
    return c.RunStarted(
        event_id=c.derive_event_id(run_id, "RunStarted"),
        run_id=run_id,
        ts=time.time(),
        config={"memory": msgspec.to_builtins(memory)},
        seed=0,
        targets=[],
        parent_run=parent,
    )


def _request(
    run_id: str, memory: MemoryConfig, *, candidate: str = "k1", expect: tuple[str, ...] = ()
) -> c.MemoryRequested:
    result_id = c.derive_event_id(run_id, "MemoryRetrieved", "silu", 1, candidate)
    return c.MemoryRequested(
        event_id=c.derive_event_id(run_id, "MemoryRequested", result_id),
        run_id=run_id,
        ts=time.time(),
        result_id=result_id,
        problem="silu",
        op_type="silu",
        device="cpu",
        language="c",
        iteration=1,
        candidate_id=candidate,
        candidate_source="for (i...) y[i] = x[i] / (1 + exp(-x[i]));",
        memory=msgspec.to_builtins(memory),
        expect_entry_ids=list(expect),
    )


def _answers(
    url: str,
    uri: str,
    embedder,
    events: list[c.Event],
    runs: set[str] | None = None,
) -> list[c.MemoryRetrieved]:
    """Publish `events`, let a retriever of the memory at `uri` answer, return the answers."""

    async def go() -> list[c.MemoryRetrieved]:
        elog = await EventLog.connect(url)
        if events:
            await elog.publish_many(events)
        worker = MemoryRetriever(url, uri, embedder=embedder.name)
        await worker.run(until_idle_s=0.5)
        await worker.close()
        out = [
            e
            for r in (runs or {e.run_id for e in events})
            for e in await elog.history(r)
            if isinstance(e, c.MemoryRetrieved)
        ]
        await elog.close()
        return out

    return asyncio.run(go())


def test_retrieves_with_the_run_settings_and_never_its_own_future(
    nats_server, memory, memory_uri, embedder, make_entry
):
    other = make_entry("Vectorize the exp", "use 8-wide lanes for silu", problem="silu", source_run="run-old")
    mine_now = make_entry("Unroll by 4", "unrolled silu", problem="silu", source_run="run-new")
    mine_later = make_entry(
        "Fuse the store", "a later insight of this run", problem="silu", source_run="run-new"
    )
    memory.upsert([other, mine_now, mine_later])
    cfg = MemoryConfig(uri=memory_uri, top_m=8, index_wait_s=1.0)
    req = _request("run-new", cfg, expect=(mine_now.id,))
    (got,) = _answers(nats_server.url, memory_uri, embedder, [_started("run-new", cfg), req])
    assert got.event_id == req.result_id and got.causation_id == req.event_id and not got.note
    ids = {e.entry_id for e in got.entries}
    assert ids == {other.id, mine_now.id}  # the run's later entry is its future: never retrieved
    assert "silu" in got.query


def test_entries_not_indexed_in_time_are_said(nats_server, memory, memory_uri, embedder, make_entry):
    memory.upsert([make_entry("Vectorize", "8-wide lanes", problem="silu", source_run="run-old")])
    cfg = MemoryConfig(uri=memory_uri, top_m=4, index_wait_s=0.2)
    req = _request("run-w", cfg, expect=("never-indexed",))
    (got,) = _answers(nats_server.url, memory_uri, embedder, [_started("run-w", cfg), req])
    assert "1 of this run's entries not indexed after 0s" in got.note
    assert got.entries  # it still retrieves what there is


def test_an_ablation_is_served_its_parents_retrieval_only_with_the_same_settings(
    nats_server, memory, memory_uri, embedder, make_entry
):
    memory.upsert([make_entry("Vectorize", "8-wide lanes", problem="silu", source_run="run-old")])
    cfg = MemoryConfig(uri=memory_uri, top_m=4)
    parent_req = _request("run-p", cfg)
    recorded = c.MemoryRetrieved(
        event_id=parent_req.result_id,
        run_id="run-p",
        ts=1.0,
        problem="silu",
        iteration=1,
        candidate_id="k1",
        query="recorded query",
        entries=[],
    )
    same, changed = _request("run-a", cfg), _request("run-b", msgspec.structs.replace(cfg, top_m=2))
    got = _answers(
        nats_server.url,
        memory_uri,
        embedder,
        [
            _started("run-p", cfg),
            recorded,
            _started("run-a", cfg, parent="run-p"),
            same,
            _started("run-b", msgspec.structs.replace(cfg, top_m=2), parent="run-p"),
            changed,
        ],
    )
    by_run = {e.run_id: e for e in got}
    assert by_run["run-a"].query == "recorded query" and by_run["run-a"].event_id == same.result_id
    assert by_run["run-b"].query != "recorded query" and by_run["run-b"].entries


def test_only_a_worker_of_the_run_s_memory_answers(
    nats_server, memory, memory_uri, embedder, make_entry, tmp_path
):
    memory.upsert([make_entry("Vectorize", "8-wide lanes", problem="silu", source_run="run-old")])
    cfg = MemoryConfig(uri=memory_uri, top_m=4)
    req = _request("run-m", cfg)
    other = str(tmp_path / "another-memory")
    assert _answers(nats_server.url, other, embedder, [_started("run-m", cfg), req]) == []  # not its memory
    (got,) = _answers(nats_server.url, memory_uri, embedder, [], runs={"run-m"})
    assert got.event_id == req.result_id and got.entries


def test_the_session_waits_for_the_run_s_entries_to_be_indexed(nats_server):
    """`wait_indexed` (what a run does before exporting its log) counts the entries the
    curator has not said `MemoryIndexed` for, and gives up after its timeout."""
    from actors.runtime.session import wait_indexed

    said = c.MemoryIndexed(
        event_id=c.derive_event_id("run-i", "MemoryIndexed", "e1"), run_id="run-i", ts=1.0, entry_id="e1"
    )

    async def go() -> tuple[int, int]:
        elog = await EventLog.connect(nats_server.url)
        await elog.publish(said)
        await elog.close()
        done = await wait_indexed(nats_server.url, "run-i", {"e1"}, timeout_s=5.0)
        left = await wait_indexed(nats_server.url, "run-i", {"e1", "e2"}, timeout_s=0.3)
        return done, left

    assert asyncio.run(go()) == (0, 1)
