"""Two runs on different devices, each fleet with its own log and curator, write one memory
and each retrieves the other's insight (real nats-servers, real Ray actors, one LanceDB URI)."""

from __future__ import annotations

import asyncio

from actors.curator import MemoryCuratorActor
from events.catalog import MemoryRetrieved, derive_event_id
from events.log import EventLog
from events.server import NatsServer
from memory_index import MemoryIndex, format_for_prompt, query_for


def test_runs_on_cpu_and_trn1_share_one_memory(nats_server, tmp_path, ray_session, memory_uri, embedder,
                                                make_entry, to_events):
    ray = ray_session
    fleet_b = NatsServer(tmp_path / "nats-b")
    fleet_b.start()
    cpu_rms = make_entry("**Fuse the RMS normalization into the matmul row loop**",
                         "Compute each row's inverse RMS once and scale the A tile while loading it into "
                         "the matmul inner loop.", problem="rmsnorm_matmul", device="cpu", language="c",
                         speedup=1.6, source_run="run-cpu")
    cpu_other = make_entry("**Privatize histogram bins per thread**", "Per-thread bins, merged at the end.",
                           problem="histogram", device="cpu", language="c", source_run="run-cpu")
    trn_softmax = make_entry("**Single-pass online softmax with the row max kept in SBUF**",
                             "Track the running max and rescale the running sum so each softmax row is "
                             "read from HBM once.", problem="softmax", device="trn1", language="nki",
                             speedup=2.1, source_run="run-trn1")
    trn_other = make_entry("**Use the DMA engine to transpose tiles**", "Transposing DMA of 128x128 tiles.",
                           problem="transpose", device="trn1", language="nki", source_run="run-trn1")
    actors = [MemoryCuratorActor.remote(url, memory_uri, batch_window_s=0.02)
              for url in (nats_server.url, fleet_b.url)]
    try:
        assert ray.get([a.ready.remote() for a in actors], timeout=120) == [True, True]
        runs = [a.run.remote() for a in actors]
        index = MemoryIndex.open(memory_uri, embedder=embedder)

        async def fleets() -> list[MemoryRetrieved]:
            log_a = await EventLog.connect(nats_server.url)
            log_b = await EventLog.connect(fleet_b.url)
            await log_a.publish_many(to_events([cpu_rms, cpu_other]))
            await log_b.publish_many(to_events([trn_softmax, trn_other]))
            everything = [cpu_rms.id, cpu_other.id, trn_softmax.id, trn_other.id]
            assert await index.wait_for_ids(everything, timeout_s=60) == set(everything)

            # What each run's coordinator does before planning its next problem.
            recorded = []
            for elog, run_id, problem, device, language in (
                (log_a, "run-cpu", "safe_softmax", "cpu", "c"),
                (log_b, "run-trn1", "add_rmsnorm_matmul", "trn1", "nki"),
            ):
                query = query_for(problem, problem, device, language)
                found = await asyncio.to_thread(index.search, query, top_m=16)
                event = MemoryRetrieved(
                    event_id=derive_event_id(run_id, "MemoryRetrieved", problem, 1, "k0"), run_id=run_id,
                    ts=0.0, problem=problem, iteration=1, candidate_id="k0", query=query, entries=found)
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
        assert index.count() == 4

        for a in actors:
            a.stop.remote()
        summaries = ray.get(runs, timeout=60)
        assert sorted(s["written"] for s in summaries) == [2, 2]
        assert summaries[0]["durable"] == summaries[1]["durable"]  # same memory, same consumer name
    finally:
        for a in actors:
            ray.kill(a)
        fleet_b.kill()
