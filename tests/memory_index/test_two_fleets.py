"""Two runs on different devices, each fleet with its own log and curator, write one memory
concurrently and each retrieves the other's insight (real nats-servers, real Ray actors, one
LanceDB URI: a folder, or a prefix on a local S3 API served by moto)."""

from __future__ import annotations

import asyncio

from accelopt.catalog import MemoryRetrieved, derive_event_id
from events.log import EventLog
from events.server import NatsServer
from memory_index import MemoryIndex, SearchQuery, format_for_prompt, query_for

BULK = 20  # entries per fleet besides the two named insights
SHARED = 8  # entries on both fleets' logs (a run resumed on the other fleet): must stay one row each


def test_runs_on_cpu_and_trn1_share_one_memory(
    nats_server, tmp_path, ray_session, shared_memory, embedder, make_entry, to_events, request, curator_hosts
):
    ray = ray_session
    uri, storage_options = shared_memory
    fleet_b = NatsServer(tmp_path / "nats-b")
    fleet_b.start()
    cpu_rms = make_entry(
        "**Fuse the RMS normalization into the matmul row loop**",
        "Compute each row's inverse RMS once and scale the A tile while loading it into "
        "the matmul inner loop.",
        problem="rmsnorm_matmul",
        device="cpu",
        language="c",
        speedup=1.6,
        source_run="run-cpu",
    )
    cpu_other = make_entry(
        "**Privatize histogram bins per thread**",
        "Per-thread bins, merged at the end.",
        problem="histogram",
        device="cpu",
        language="c",
        source_run="run-cpu",
    )
    trn_softmax = make_entry(
        "**Single-pass online softmax with the row max kept in SBUF**",
        "Track the running max and rescale the running sum so each softmax row is read from HBM once.",
        problem="softmax",
        device="trn1",
        language="nki",
        speedup=2.1,
        source_run="run-trn1",
    )
    trn_other = make_entry(
        "**Use the DMA engine to transpose tiles**",
        "Transposing DMA of 128x128 tiles.",
        problem="transpose",
        device="trn1",
        language="nki",
        source_run="run-trn1",
    )

    def bulk(run: str, device: str, language: str, n: int, start: int = 0) -> list:
        return [
            make_entry(
                f"**Unroll the scan of problem q{i} by {i % 5 + 2}**",
                f"Unroll the prefix-scan loop of q{i} by {i % 5 + 2} and keep the carry in a register.",
                problem=f"q{i}",
                device=device,
                language=language,
                speedup=1.1,
                source_run=run,
                id=f"{run}-bulk{i}",
            )
            for i in range(start, start + n)
        ]

    only_a = [cpu_rms, cpu_other, *bulk("run-cpu", "cpu", "c", BULK)]
    only_b = [trn_softmax, trn_other, *bulk("run-trn1", "trn1", "nki", BULK)]
    shared = bulk("run-moved", "cpu", "c", SHARED, start=1000)
    unique = {e.id for e in only_a + only_b + shared}
    actors, runs = curator_hosts.start(
        [nats_server.url, fleet_b.url], uri, batch_max=8, batch_window_s=0.02, storage_options=storage_options
    )
    try:
        index = MemoryIndex.open(uri, embedder=embedder, storage_options=storage_options)

        async def fleets() -> list[MemoryRetrieved]:
            log_a = await EventLog.connect(nats_server.url)
            log_b = await EventLog.connect(fleet_b.url)

            async def emit(elog: EventLog, entries: list) -> None:  # as a run would, a few at a time
                events = to_events(entries)
                for i in range(0, len(events), 4):
                    await elog.publish_many(events[i : i + 4])
                    await asyncio.sleep(0.01)

            # Both fleets write at once; the shared entries go to both logs, in opposite orders.
            await asyncio.gather(emit(log_a, only_a + shared), emit(log_b, shared[::-1] + only_b))
            assert await index.wait_for_ids(unique, timeout_s=120) == unique

            # What each run's coordinator does before planning its next problem.
            recorded = []
            for elog, run_id, problem, device, language in (
                (log_a, "run-cpu", "safe_softmax", "cpu", "c"),
                (log_b, "run-trn1", "add_rmsnorm_matmul", "trn1", "nki"),
            ):
                query = query_for(problem, problem, device, language)
                found = await asyncio.to_thread(index.search, query, SearchQuery(top_m=16))
                event = MemoryRetrieved(
                    event_id=derive_event_id(run_id, "MemoryRetrieved", problem, 1, "k0"),
                    run_id=run_id,
                    ts=0.0,
                    problem=problem,
                    iteration=1,
                    candidate_id="k0",
                    query=query,
                    entries=found,
                )
                await elog.publish(event)
                recorded.append(next(e for e in await elog.history(run_id) if isinstance(e, MemoryRetrieved)))
            await log_a.close()
            await log_b.close()
            return recorded

        for_cpu, for_trn = asyncio.run(fleets())
        assert for_cpu.entries[0].entry_id == trn_softmax.id
        assert (for_cpu.entries[0].device, for_cpu.entries[0].language) == ("trn1", "nki")
        assert for_trn.entries[0].entry_id == cpu_rms.id
        assert (for_trn.entries[0].device, for_trn.entries[0].language) == ("cpu", "c")
        assert "device trn1, language nki: 2.10x faster" in format_for_prompt(for_cpu.entries)

        summaries = curator_hosts.stop(actors, runs)
        # Counted: nothing lost, nothing doubled, though the shared entries reached both curators.
        rows = index.list(limit=None)
        assert index.count() == len(rows) == len(unique)
        assert sorted(e.id for e in rows) == sorted(unique)
        assert index.get(trn_softmax.id) == trn_softmax
        written = sorted(s["written"] for s in summaries)
        assert len(unique) <= sum(written) <= len(unique) + SHARED, written
        assert min(written) >= 2 + BULK, written  # each fleet's curator wrote its own entries
        assert summaries[0]["durable"] == summaries[1]["durable"]  # same memory, same consumer name
        if uri.startswith("s3://"):  # the table really lives on the S3 API, not in a local folder
            keys = request.getfixturevalue("local_s3").objects(uri)
            assert any(k.endswith(".manifest") for k in keys) and any(k.endswith(".lance") for k in keys), (
                keys
            )
    finally:
        for a in actors:
            ray.kill(a)
        fleet_b.kill()
